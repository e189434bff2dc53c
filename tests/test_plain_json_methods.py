"""How :mod:`distconv.plain_json` writes what functions share and dispatch: a cell another
function rebinds, and a ``functools.singledispatchmethod``'s registry."""

from __future__ import annotations

import json

from distconv import plain_json
from distconv.layers import settings


def _counter():
    """A reader and a writer of one cell: ``count`` rebinds ``calls``, ``read`` only reads it."""
    calls = 0

    def read():
        return calls

    def count():
        nonlocal calls
        calls += 1

    return read, count


def _rebound_after():
    """A reader whose cell its factory sets again after making it, before returning it."""
    scale = 1

    def read():
        return scale

    scale = 2
    return read


def _outer_counter():
    """A writer nested one level deeper than the reader of its cell."""
    total = 0

    def read():
        return total

    def adder():
        def add(n):
            nonlocal total
            total += n

        return add

    return read, adder()


def test_a_cell_a_sibling_rebinds_is_written_by_its_type_as_ones_own_rebinding_is():
    """A cell its own function rebinds (``nonlocal``) is written by its type (its value is the
    count of calls); one rebound by another function of the same factory was written by the
    value it held: a reader's text changed with each call of its writer, so ranks that agree
    refused each other once one had called it (a dry step on rank 0)."""
    read, count = _counter()
    before = plain_json.dumps(read)
    count()
    assert plain_json.dumps(read) == before
    assert json.loads(before)["fields"]["closure"] == {"calls": "<int>"}
    assert settings.setting_value(read) == json.loads(before)
    read, add = _outer_counter()
    before = plain_json.dumps(read)
    add(3)
    assert plain_json.dumps(read) == before
    assert json.loads(before)["fields"]["closure"] == {"total": "<int>"}


def test_a_cell_its_factory_set_again_is_written_by_the_value_it_holds_now():
    """A factory's own assignment after making a closure is done once it returns: the closure
    computes with the value the cell holds now, and two over other values differ."""
    assert json.loads(plain_json.dumps(_rebound_after()))["fields"]["closure"] == {"scale": 2}
