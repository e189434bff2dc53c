"""Which cells of a closure change with use: those its own code rebinds (``nonlocal calls``)
and those another function made by the same factory rebinds (a ``count`` beside its ``read``),
found by reading the factory's code. :mod:`distconv.plain_names` writes such a cell by its
value's type alone. It imports nothing of distconv.
"""

from __future__ import annotations

import dis
import functools
import inspect
import types
from typing import Any

#: the operations that rebind a cell
_STORES = frozenset({"STORE_DEREF", "DELETE_DEREF"})


def rebound_names(function: types.FunctionType) -> frozenset[str]:
    """The free names of ``function`` whose cells change with use: those its own code (or a
    function made in it) assigns or deletes (``nonlocal calls``), and those another function
    sharing the cell does (a factory's ``count`` beside its ``read``), not the factory's own
    assignments (done once it returns). The factory is found by the qualified name's first
    part in the function's module (``make.<locals>.read``: ``make``); where that name is gone
    or names another function now, only ``function``'s own code is read."""
    own = _free_stores(function.__code__)
    parts = function.__qualname__.split(".<locals>.")
    if len(parts) < 2:  # made at a module's or a class's level: no factory's cell
        return own
    for top in _codes_named(function.__globals__, parts[0]):
        if (shared := _shared_rebound(top, function.__code__)) is not None:
            return own | shared
    return own


def _codes_named(namespace: dict[str, Any], dotted: str) -> list[types.CodeType]:
    """The code objects of the function ``dotted`` names in ``namespace`` (a module's globals;
    ``Model.build``: a class's attribute), through static and class methods, properties and
    decorators (``__wrapped__``, read by :func:`_wrapped_by`); none where it names no function."""
    first, *rest = dotted.split(".")
    found = namespace.get(first)
    for name in rest:
        found = vars(found).get(name) if isinstance(found, type) else None
    if isinstance(found, (staticmethod, classmethod)):
        found = found.__func__
    held = [found.fget, found.fset, found.fdel] if isinstance(found, property) else [found]
    codes = []
    for candidate in held:
        for _ in range(16):  # a decorated factory: the function it wraps (lru_cache's too)
            if isinstance(candidate, types.FunctionType):
                codes.append(candidate.__code__)
            if (candidate := _wrapped_by(candidate)) is None:
                break
    return codes


@functools.lru_cache(maxsize=4096)
def _shared_rebound(top: types.CodeType, code: types.CodeType) -> frozenset[str] | None:
    """The free names of ``code`` a function made within ``top`` assigns or deletes in the
    cell ``code`` reads; None where neither ``code`` nor one equal to it (its source run again, a
    module reloaded: an equal key of the cache, whichever came first) is made within it."""
    if (chain := _path(top, code)) is None:
        return None
    free, names = set(code.co_freevars), set()
    for owner in reversed(chain):  # the factory first, then the one around it
        here = free & set(owner.co_cellvars)  # the cells this one owns
        made = [_free_stores(c) for c in owner.co_consts if isinstance(c, types.CodeType)]
        names |= here.intersection(set().union(*made))
        if owner.co_flags & _SUSPENDS:  # a generator's own stores count too: it resumes
            names |= here & _own_stores(owner)
        free = (free - here) & set(owner.co_freevars)  # handed on from further out
    return frozenset(names)


#: the code flags of a function that suspends and resumes (a generator, a coroutine, an
#: asynchronous generator): it is not done with its cells when it hands out a closure
_SUSPENDS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


@functools.lru_cache(maxsize=4096)
def _own_stores(code: types.CodeType) -> frozenset[str]:
    """The cells ``code`` (a generator's) assigns or deletes itself, wherever in its code. A
    closure it yields sees such a cell change each time the generator is resumed past the
    store, and whether a store can come after a reader was handed out follows the flow of its
    code (loops, handlers, a reader handed out by ``locals()``), which an earlier rule that
    followed it got wrong both ways and slowly. Written by type, a store made only before the
    reader exists makes two factories given other values agree: the job check misses that
    difference rather than refuse ranks that agree (as for a memo's ``cache = {}``)."""
    return frozenset(i.argval for i in dis.get_instructions(code) if i.opname in _STORES)


def _path(top: types.CodeType, code: types.CodeType) -> list[types.CodeType] | None:
    """The code objects from ``top`` down to one holding ``code`` (or its equal), or None."""
    for const in top.co_consts:
        if const == code:
            return [top]
        if isinstance(const, types.CodeType) and (below := _path(const, code)) is not None:
            return [top, *below]
    return None


@functools.lru_cache(maxsize=4096)
def _free_stores(code: types.CodeType) -> frozenset[str]:
    """The free names ``code`` assigns or deletes, itself or in a function made in it that
    reads the same cell (not one making a cell of that name of its own). Once a code object."""
    names = {found.argval for found in dis.get_instructions(code) if found.opname in _STORES}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _free_stores(const)
    return frozenset(names & set(code.co_freevars))


def _wrapped_by(value: Any) -> Any:
    """The function ``value`` wraps (its ``__wrapped__``, as Python's own lookup finds it, not
    through a ``__getattr__`` of its class), or None: the factory a decorator wraps."""
    try:
        return object.__getattribute__(value, "__wrapped__")
    except AttributeError:
        return None
