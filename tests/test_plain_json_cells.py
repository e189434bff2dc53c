"""How :mod:`distconv.plain_json` writes what a function holds (its cells, its defaults, a
wrapper's function, a ``functools.singledispatch`` function's registry): the same in every
process whose configuration is the same, whatever that process has done with it (called it,
imported other modules first), and without an error where a value's attribute raises."""

from __future__ import annotations

import datetime
import decimal
import fractions
import functools
import json
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest

from distconv import plain_json
from distconv.layers import settings
from tests.child_env import child_env


class _Unloaded:
    """An object whose ``__wrapped__`` raises (a lazy handle not yet loaded)."""

    def __init__(self, error: Exception):
        self.error = error

    @property
    def __wrapped__(self):
        raise self.error


class _UnloadedCall(_Unloaded):
    """One that is callable too: asked for what it wraps, as ``functools.cache``'s wrapper."""

    def __call__(self):
        return None


@pytest.mark.parametrize("error", [RuntimeError("not loaded"), KeyError("__wrapped__")])
def test_an_object_whose_wrapped_raises_is_written_not_an_error(error: Exception):
    """``__wrapped__`` was read of every object walked, before what decides it is no wrapper
    (not callable, a text of its own): one whose property raises stopped the job check and a
    layer's settings with that error. It is read only of a callable of no text of its own,
    and an error there means no wrapper."""
    written = {"class": "_Unloaded", "fields": {"error": str(error)}}
    assert json.loads(plain_json.dumps({"v": _Unloaded(error)})) == {"v": written}
    assert settings.setting_value(_Unloaded(error)) == written
    assert json.loads(plain_json.dumps(_UnloadedCall(error))) == {
        **written,
        "class": "_UnloadedCall",
    }


def _memo(function):
    """The usual memo decorator: its cache a public cell, filled in by each call."""
    cache = {}

    @functools.wraps(function)
    def remembered(x):
        if x not in cache:
            cache[x] = function(x)
        return cache[x]

    return remembered


@_memo
def _square(x):
    return x * x


def _counting():
    calls = 0  # rebound by each call (nonlocal): an int, but not the one it was made with

    def count(x):
        nonlocal calls
        calls += 1
        return x

    return count


def _keeping(kept, seen=[], limit=2, names=("conv1",)):  # noqa: B006 (the idiom itself)
    def keep(x):
        seen.append(x)
        kept[...] = x
        return limit, names

    return keep


def _scaler(factor):
    def scale(x):
        return factor * x

    return scale


def test_a_cell_or_default_that_changes_with_use_is_written_by_its_kind_alone():
    """A public cell or default holding a mutable value (a memo decorator's ``cache = {}``, a
    list default filled in, an array written in place) or one its function rebinds
    (``nonlocal calls``) was written with what it held: ranks that agree refused each other
    at the job check once one had called it (a dry step on rank 0). It is written by its
    type's name (an array by its dtype and shape); a value that cannot change (a number, a
    tuple or frozenset of such, a function) is still written, so two made over other values
    differ."""
    made = [_square, _counting(), _keeping(np.zeros(3))]
    before = plain_json.dumps(made)
    for function in made:
        function(3)
    assert plain_json.dumps(made) == before
    assert settings.setting_value(made) == json.loads(before)
    square, count, keep = json.loads(before)
    assert square["fields"]["closure"] == {
        "cache": "<dict>",
        "function": "<function tests.test_plain_json_cells._square>",
    }
    assert count["fields"]["closure"] == {"calls": "<int>"}
    assert keep["fields"]["closure"] == {
        "kept": {"dtype": "float64", "shape": [3]},
        "limit": 2,
        "names": ["conv1"],
        "seen": "<list>",
    }
    assert plain_json.dumps(_scaler(2)) != plain_json.dumps(_scaler(3))
    assert plain_json.dumps(_scaler((1, frozenset({2})))) != plain_json.dumps(_scaler((1,)))
    assert plain_json.dumps(_scaler(_scaler(2))) != plain_json.dumps(_scaler(_scaler(3)))
    assert plain_json.dumps(_scaler(np.zeros(3))) != plain_json.dumps(_scaler(np.zeros(4)))
    assert plain_json.dumps(_scaler([1])) == plain_json.dumps(_scaler([2]))  # refused alike


#: a config's singledispatch function over an abstract class, written after a call: each
#: process imports it after other modules of its own (``import fractions`` registers with
#: ``numbers``' abstract classes, moving abc's count of registrations)
_DISPATCH = """
{extra}
import collections.abc, functools
from distconv import plain_json

@functools.singledispatch
def describe(x):
    return "value"

@describe.register
def _(x: collections.abc.Sequence):
    return "sequence"

describe([1])
print(plain_json.dumps({{"describe": describe}}))
"""


def test_a_single_dispatch_function_is_written_alike_whatever_else_its_process_imported():
    """A ``functools.singledispatch`` function's closure holds ``cache_token``, abc's count of
    registrations in its process: walked, two processes that had imported other modules (one
    ``fractions`` more) wrote other counts, and ranks of one config refused each other at the
    job check. It is written by its function and its registry, the registered functions by
    type, not by its cells."""
    written = [
        subprocess.run(
            [sys.executable, "-c", _DISPATCH.format(extra=extra)],
            capture_output=True,
            text=True,
            env=child_env(PYTHONHASHSEED=seed),
            timeout=50,
            check=True,
        ).stdout
        for extra, seed in (("", "1"), ("import fractions", "2"))
    ]
    assert written[0] == written[1]
    assert json.loads(written[0])["describe"]["fields"] == {
        "func": "<function __main__.describe>",
        "registry": {
            "builtins.object": "<function __main__.describe>",
            "collections.abc.Sequence": "<function __main__._>",
        },
    }


def test_a_layer_setting_asks_a_plain_dict_or_list_nothing_of_process_state(monkeypatch):
    """A layer's settings asked :func:`~distconv.plain_json.is_process_state` (a dozen type
    checks) of every mapping, a plain dict too (a fifth slower over many small ones), which
    is never process state: asked only of another mapping (``os.environ``), as the job
    check asks."""
    asked = []

    def counted(value):
        asked.append(type(value).__qualname__)
        return False

    monkeypatch.setattr(settings, "is_process_state", counted)
    value = {"a": [{"b": 1}, ({"c": 2},)]}
    assert settings.setting_value(value) == {"a": [{"b": 1}, ({"c": 2},)]}
    assert asked == []
    settings.setting_value(types.MappingProxyType({"a": 1}))
    assert asked == ["mappingproxy"]


def _composed(first, then):
    return lambda x: then(first(x))


def test_a_chain_of_250_composed_functions_is_written_not_refused_as_too_deep():
    """Each closure's level of a composed transform cost five Python calls of the walk (its
    fields, its cells, each dict's comprehension), so one of 200 steps was refused as too
    deep on every rank, where its name alone had been written before cells were walked. The
    walk now costs two a level; JSON's own encoder, three a level, bounds it near 330."""
    steps = [_scaler(k) for k in range(250)]
    chain = functools.reduce(_composed, steps)
    written = json.loads(plain_json.dumps({"transform": chain}))["transform"]
    assert written["fields"]["closure"]["then"]["fields"]["closure"] == {"factor": 249}
    assert settings.setting_value(chain) == written


def _scaled_by(factor: object):
    """A closure over ``factor`` (a setting held in a cell)."""

    def scaled(x):
        return x * factor

    return scaled


@pytest.mark.parametrize(
    "one, other",
    [
        (range(3), range(4)),
        (slice(0, 2), slice(0, 3)),
        (pathlib.Path("a"), pathlib.Path("b")),
        (decimal.Decimal("0.1"), decimal.Decimal("0.2")),
        (fractions.Fraction(1, 3), fractions.Fraction(1, 4)),
        (datetime.timedelta(1), datetime.timedelta(2)),
        (functools.partial(max, 1), functools.partial(max, 2)),
    ],
)
def test_a_captured_value_that_cannot_change_is_written_by_value(one, other):
    """A range, slice, path, Decimal, Fraction, timedelta or a partial of such captured by a
    closure was written by its type's name alone, as a dict is: closures over two of them
    agreed, in the job check and in a layer's settings, though none changes with use."""
    assert plain_json.dumps(_scaled_by(one)) == plain_json.dumps(_scaled_by(one))
    assert plain_json.dumps(_scaled_by(one)) != plain_json.dumps(_scaled_by(other))
    assert settings.setting_value(_scaled_by(one)) != settings.setting_value(_scaled_by(other))


def test_a_partial_holding_a_mutable_value_is_written_by_its_type():
    """A partial that binds a dict may change with use, as the dict itself may."""
    memo_one, memo_two = functools.partial(max, {}), functools.partial(max, {"a": 1})
    assert plain_json.dumps(_scaled_by(memo_one)) == plain_json.dumps(_scaled_by(memo_two))


def test_a_slice_over_a_list_is_written_by_its_type():
    """A slice is written by its text, so one bound to a list changed as the list did."""
    ends = [1]
    before = plain_json.dumps(_scaled_by(slice(0, ends)))
    ends.append(2)
    assert plain_json.dumps(_scaled_by(slice(0, ends))) == before


def test_a_chain_of_partials_is_written_by_its_type_not_refused():
    """A closure over a chain of partials (each level three calls of the check deep) was
    refused as too deep from some 250 levels; a partial binding a partial is a partial."""
    chain = functools.partial(max, 1)
    for _ in range(400):  # each bound as the next one's argument (partial(partial(...)) is flat)
        chain = functools.partial(max, chain)
    assert json.loads(plain_json.dumps(_scaled_by(chain))) is not None


def test_a_partials_keyword_and_a_date_are_written_by_value():
    """A partial's keyword arguments and a date are settings, as its positional ones are."""
    one, two = functools.partial(max, key=abs), functools.partial(max, key=len)
    assert plain_json.dumps(_scaled_by(one)) != plain_json.dumps(_scaled_by(two))
    days = datetime.date(2026, 1, 1), datetime.date(2026, 1, 2)
    assert plain_json.dumps(_scaled_by(days[0])) != plain_json.dumps(_scaled_by(days[1]))


def test_a_partial_binding_a_partial_is_written_by_value():
    """partial(max, partial(min, 0.1)) and the same over 0.2 were both written '<partial>'
    (a partial binding a partial was not held): the job check missed their difference."""
    one = functools.partial(max, functools.partial(min, 0.1))
    two = functools.partial(max, functools.partial(min, 0.2))
    assert plain_json.dumps(_scaled_by(one)) != plain_json.dumps(_scaled_by(two))


@pytest.mark.parametrize("wrap", [lambda p: (p,), lambda p: slice(0, p)], ids=["tuple", "slice"])
def test_a_chain_wrapped_in_tuples_or_slices_is_written_not_refused(wrap):
    """A chain of partials each wrapped in a tuple or a slice got round the partial rule and
    was refused as too deep from some 140 levels: past a few levels it is written by type."""
    chain = functools.partial(max, 1)
    for _ in range(400):
        chain = functools.partial(max, wrap(chain))
    assert json.loads(plain_json.dumps(_scaled_by(chain))) is not None


def test_a_setting_nested_in_a_few_tuples_is_written_by_value():
    """Past eight levels a nested tuple was written by its type's name, and so was each tuple
    around it: (0.1, deep) and (0.2, deep) agreed, the 0.1 lost with the deep part."""

    def nest(value: object, levels: int) -> object:
        for _ in range(levels):
            value = (value,)
        return value

    deep = nest(1, 9)
    assert plain_json.dumps(_scaled_by((0.1, deep))) != plain_json.dumps(_scaled_by((0.2, deep)))
    assert plain_json.dumps(_scaled_by(nest(0.1, 9))) != plain_json.dumps(_scaled_by(nest(0.2, 9)))
