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
    # the factory first, then the one around it; each beside the code it makes on the way
    for owner, child in reversed(list(zip(chain, [*chain[1:], code]))):
        here = free & set(owner.co_cellvars)  # the cells this one owns
        made = [_free_stores(c) for c in owner.co_consts if isinstance(c, types.CodeType)]
        names |= here.intersection(set().union(*made))
        if owner.co_flags & _SUSPENDS:  # a generator's own stores once resumed count too
            names |= here & _stores_after_yield(owner, child)
        free = (free - here) & set(owner.co_freevars)  # handed on from further out
    return frozenset(names)


#: the code flags of a function that suspends and resumes (a generator, a coroutine, an
#: asynchronous generator): it is not done with its cells when it hands out a closure
_SUSPENDS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


@functools.lru_cache(maxsize=4096)
def _stores_after_yield(code: types.CodeType, made: types.CodeType) -> frozenset[str]:
    """The cells ``code`` (a generator's) assigns or deletes once it may have handed out the
    function it makes of ``made`` and yielded: a store the flow of its code can reach from a
    yield that follows a use of that function (its making, or a load of the name it is stored
    in), a loop's jump back included. A closure it yields sees such a cell change each time the
    generator is resumed; a store before then, or on a branch taken only where the closure was
    never used, is done before any closure it yields is seen, as a function's: written by its
    value, so two ranks whose factories were given other values do not agree."""
    found = list(dis.get_instructions(code))
    after = _successors(code, found)
    escapes = _uses(found, made)
    yields = [i for i in _reached(after, escapes) if found[i].opname == "YIELD_VALUE"]
    return frozenset(found[i].argval for i in _reached(after, yields) if found[i].opname in _STORES)


#: the jumps that never go on to the next instruction, and the instructions that leave
_GOES_ON_NEVER = frozenset(
    {"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_ABSOLUTE", "JUMP"}
    | {"JUMP_NO_INTERRUPT", "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"}
)
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


def _successors(code: types.CodeType, found: list[dis.Instruction]) -> list[list[int]]:
    """Where the flow may go from each of ``found`` (by index): the next instruction, a jump's
    target, an exception's handler (the table of Python 3.11 on)."""
    at = {i.offset: n for n, i in enumerate(found)}
    handlers = getattr(dis.Bytecode(code), "exception_entries", ())
    after: list[list[int]] = []
    for n, i in enumerate(found):
        goes = [] if i.opname in _GOES_ON_NEVER or n + 1 == len(found) else [n + 1]
        if i.opcode in _JUMPS and i.argval in at:
            goes.append(at[i.argval])
        goes += [at[h.target] for h in handlers if h.start <= i.offset < h.end]
        after.append(goes)
    return after


def _uses(found: list[dis.Instruction], made: types.CodeType) -> list[int]:
    """Where the function made of ``made`` may leave the generator's hands: its making, where
    it is not stored in a name at once (a decorator's call, ``yield lambda: x``), else each
    load of that name (``yield read``). A name rebound later only adds loads: more, not less."""
    uses = []
    for n, i in enumerate(found):
        if i.opname != "LOAD_CONST" or i.argval != made:
            continue
        k = n + 1
        while k < len(found) and found[k].opname in _MAKING:
            k += 1
        if k == len(found) or found[k].opname not in ("STORE_FAST", "STORE_DEREF"):
            uses.append(n)
            continue
        name = found[k].argval
        uses += [
            m
            for m, j in enumerate(found)
            if m > k and j.opname.startswith("LOAD_") and name in _names(j.argval)
        ]
    return uses


#: what follows the load of a function's code in its making (its name, Python 3.10; its
#: closure's attribute, Python 3.13)
_MAKING = frozenset({"LOAD_CONST", "MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE"})


def _names(argval: Any) -> tuple[Any, ...]:
    """The names an instruction loads (Python 3.13's ``LOAD_FAST_LOAD_FAST``: two)."""
    return argval if isinstance(argval, tuple) else (argval,)


def _reached(after: list[list[int]], starts: list[int]) -> list[int]:
    """The instructions (by index) the flow may reach past any of ``starts``."""
    seen: set[int] = set()
    todo = [n for s in starts for n in after[s]]
    while todo:
        if (n := todo.pop()) not in seen:
            seen.add(n)
            todo += after[n]
    return sorted(seen)


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
