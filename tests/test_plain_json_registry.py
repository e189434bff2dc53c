"""How :mod:`distconv.plain_json` writes a ``functools.singledispatch`` registry whose
registered types share a module-qualified name (two local classes of one factory)."""

from __future__ import annotations

import functools
import json

from distconv import plain_json


def _kind():
    """A class made anew at each call: each of one module-qualified name."""

    class Kind:
        pass

    return Kind


def _dispatch(first, second):
    """A singledispatch function with ``first`` registered for one ``_kind()`` and
    ``second`` for another, of the same qualified name."""

    @functools.singledispatch
    def handle(x):
        return x

    handle.register(_kind(), first)
    handle.register(_kind(), second)
    return handle


def test_two_registered_types_of_one_name_are_both_written_in_registration_order():
    """Keyed by the type's module-qualified name alone, the second entry replaced the first:
    ``_dispatch(abs, round)`` and ``_dispatch(max, round)`` agreed in the job check, though
    they compute differently. Each is kept, the second numbered, in the order registered."""
    registry = json.loads(plain_json.dumps(_dispatch(abs, round)))["fields"]["registry"]
    name = "tests.test_plain_json_registry._kind.<locals>.Kind"
    assert registry == {
        "builtins.object": registry["builtins.object"],
        name: "<built-in function builtins.abs>",
        f"{name} 2": "<built-in function builtins.round>",
    }
    assert plain_json.dumps(_dispatch(abs, round)) != plain_json.dumps(_dispatch(max, round))
    assert plain_json.dumps(_dispatch(abs, round)) == plain_json.dumps(_dispatch(abs, round))
