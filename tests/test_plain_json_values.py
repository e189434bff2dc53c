"""How :mod:`distconv.plain_json` writes values of the process (``sys.modules``) and values
JSON has no form for that are written by their text (a ``Decimal``)."""

from __future__ import annotations

import dataclasses
import decimal
import fractions
import functools
import json
import os
import pathlib
import sys
import types

import numpy as np
import pytest

from distconv import plain_json
from distconv.checkpoint_checks import as_saved
from distconv.layers import settings


@dataclasses.dataclass
class _Lookup:
    """A config's part holding a lookup of its own choosing."""

    find: object


def test_sys_modules_and_its_methods_are_written_by_name_not_walked(monkeypatch):
    """``sys.modules.get`` (a bound built-in method) was walked as a bound method is, its
    object whole: every module the process imported, by name (kilobytes, another list on each
    rank that imported other modules first), so ranks that agree were refused. ``sys.modules``
    is the process's own state, written by its name as ``os.environ`` is by its type's."""
    held = [
        {"lookup": sys.modules.get},
        functools.partial(sys.modules.get, "numpy"),
        _Lookup(sys.modules.__contains__),
        _Lookup(sys.modules),
    ]
    before = plain_json.dumps(held)
    monkeypatch.setitem(sys.modules, "_k616_imported_later", types.ModuleType("later"))
    assert plain_json.dumps(held) == before
    assert len(before) < 600
    written = json.loads(before)
    assert written[0] == {
        "lookup": {
            "class": "builtin_function_or_method",
            "fields": {"func": "<built-in method builtins.dict.get>", "self": "sys.modules"},
        }
    }
    assert written[3] == {"class": "_Lookup", "fields": {"find": "sys.modules"}}
    assert plain_json.dumps(os.environ.get) != plain_json.dumps(sys.modules.get)
    assert plain_json.is_process_state(sys.modules)
    assert json.loads(plain_json.dumps({"modules": {"a": 1}})) == {"modules": {"a": 1}}


def test_vars_of_sys_is_written_by_name_not_walked(monkeypatch):
    """``vars(sys)`` (``sys.__dict__``: ``vars(sys).get`` in a config, a layer's setting)
    was walked in full: the rank's ``argv``, ``path``, streams, and ``sys.modules`` beside
    them, kilobytes and another text on each rank."""
    held = [{"ns": vars(sys)}, vars(sys).get, _Lookup(sys.__dict__)]
    before = plain_json.dumps(held)
    monkeypatch.setattr(sys, "argv", [*sys.argv, "--rank-1"])
    assert plain_json.dumps(held) == before
    assert len(before) < 600
    assert json.loads(before)[0] == {"ns": "vars(sys)"}
    assert settings.setting_value(vars(sys)) == "vars(sys)"
    assert settings.setting_value(_FrozenLookup(vars(sys))) == {"find": "vars(sys)"}


@dataclasses.dataclass(frozen=True)
class _FrozenLookup:
    """A layer part's frozen spec holding a mapping of its own choosing."""

    find: object


def test_a_layer_setting_holding_sys_modules_writes_it_by_name_as_the_job_check(monkeypatch):
    """``setting_value`` walked a plain dict whatever it was, ``sys.modules`` too: every
    module the rank imported, by name (kilobytes, another list on a rank that imported others
    first), so a layer's settings differed between ranks that agree."""
    held = [sys.modules, _FrozenLookup(sys.modules), {"modules": sys.modules}]
    before = [settings.setting_value(value) for value in held]
    monkeypatch.setitem(sys.modules, "_k618_imported_later", types.ModuleType("later"))
    assert [settings.setting_value(value) for value in held] == before
    assert before == ["sys.modules", {"find": "sys.modules"}, {"modules": "sys.modules"}]
    assert settings.setting_value({"a": 1}) == {"a": 1}  # another dict still walked


@pytest.mark.parametrize(
    "number, kind, text",
    [
        (decimal.Decimal("0.1"), "Decimal", "0.1"),
        (1 + 2j, "complex", "(1+2j)"),
        (np.complex64(1 + 2j), "complex", "(1+2j)"),  # its item(): a complex
        (fractions.Fraction(1, 10), "Fraction", "1/10"),  # a Real, but no JSON number
    ],
    ids=["decimal", "complex", "numpy complex", "fraction"],
)
def test_a_number_json_has_no_form_for_is_written_with_its_type(number, kind, text):
    """A Decimal, a complex or a Fraction was written by its text alone: ``Decimal("0.1")``
    and the string ``"0.1"`` agreed in the job check, though one computes exactly and the
    other is no number. Its type is written beside its text."""
    written = json.loads(plain_json.dumps({"lr": number}))["lr"]
    assert written == {"class": kind, "text": text}
    assert plain_json.dumps(number) != plain_json.dumps(text)
    assert plain_json.dumps({number: 1}) != plain_json.dumps({text: 1})
    assert plain_json.dumps(_Lookup(number)) != plain_json.dumps(_Lookup(text))


def test_plain_json_values_and_other_texts_are_written_as_before():
    """Values JSON writes, and those an older checkpoint's facts hold by their text (a path, a
    dtype), are written as before: the checkpoint is still resumed. (A Fraction is written
    with its type now, and an older checkpoint's "9/10" still resumes:
    tests/test_resume_older_number_form.py.)"""
    plain = {"s": "0.1", "i": 1, "f": 0.1, "b": True, "n": None, "l": [1, "a"], "d": {"k": [2.5]}}
    assert plain_json.dumps(plain) == json.dumps(plain)
    assert plain_json.dumps(plain, sort_keys=True) == json.dumps(plain, sort_keys=True)
    others = [pathlib.Path("data"), np.dtype("float16"), np.float32(0.5), np.int64(3)]
    assert json.loads(plain_json.dumps(others)) == ["data", "float16", 0.5, 3]
    assert as_saved({"lr_decay": fractions.Fraction(9, 10)}) == {
        "lr_decay": {"class": "Fraction", "text": "9/10"}
    }
