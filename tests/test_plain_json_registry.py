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


def test_two_registered_types_of_one_name_are_both_written():
    """Keyed by the type's module-qualified name alone, the second entry replaced the first:
    ``_dispatch(abs, round)`` and ``_dispatch(max, round)`` agreed in the job check, though
    they compute differently. Each is kept, the second numbered (in the order of what they
    are written as, :func:`test_a_registry_is_written_whatever_order_it_was_registered_in`)."""
    registry = json.loads(plain_json.dumps(_dispatch(abs, round)))["fields"]["registry"]
    name = "tests.test_plain_json_registry._kind.<locals>.Kind"
    assert registry == {
        "builtins.object": registry["builtins.object"],
        name: "<built-in function builtins.abs>",
        f"{name} 2": "<built-in function builtins.round>",
    }
    assert plain_json.dumps(_dispatch(abs, round)) != plain_json.dumps(_dispatch(max, round))
    assert plain_json.dumps(_dispatch(abs, round)) == plain_json.dumps(_dispatch(abs, round))


class _First:
    pass


class _Second:
    pass


def test_a_registry_is_written_whatever_order_it_was_registered_in():
    """A registry was written in the order registered: ranks that register the same types
    (another import order, a plugin loaded first) were refused, even by ``sort_keys``, where two
    types of one name were numbered the other way. Its entries are in the order of their
    types' module-qualified names, then of their functions' names."""
    kinds = [_kind(), _kind()]

    def registered(pairs):
        @functools.singledispatch
        def handle(x):
            return x

        for kind, function in pairs:
            handle.register(kind, function)
        return handle

    pairs = [(_First, abs), (kinds[0], max), (_Second, round), (kinds[1], min)]
    written = plain_json.dumps(registered(pairs))
    assert plain_json.dumps(registered(pairs[::-1])) == written
    name = "tests.test_plain_json_registry._kind.<locals>.Kind"
    assert list(json.loads(written)["fields"]["registry"]) == [
        "builtins.object",
        "tests.test_plain_json_registry._First",
        "tests.test_plain_json_registry._Second",
        name,
        f"{name} 2",
    ]
