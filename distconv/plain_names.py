"""The text :mod:`distconv.plain_json` writes a module and a function by: what names it, the
same in every process that holds it, never its address nor its install path; and the fields it
walks a ``functools.partial``, a bound method and an object of attributes by. Of distconv it
imports only :mod:`distconv.plain_cells` (which cells of a closure change with use), which
imports none: :mod:`distconv.plain_json`, which the layers share, imports it.
"""

from __future__ import annotations

import datetime
import decimal
import enum
import fractions
import functools
import pathlib
import sys
import types
from collections.abc import Container, Mapping
from typing import Any

from distconv.plain_cells import rebound_names


def code_name(value: Any) -> str | None:
    """The text of a module (``<module 'json'>``) or a Python function (``<function
    pkg.mod.scale>``), or None where ``value`` is written otherwise.

    A module's own text held its file's path (``<module 'x' from '/home/a/venv/...'>``):
    another on each host or venv, so ranks that agree disagreed. A function's held its
    address, and less it, its qualified name alone: two modules' ``scale`` agreed, and so did
    any two lambdas. Its module tells the first apart. A lambda (``<lambda>``), or a function
    made in another's call (``make.<locals>.scale``), is not the only one of its qualified name
    in its module, so its first line follows: ``<function pkg.mod.<lambda> line 12>``, the same
    in each process that runs that source (no path in it), another where the source moved.
    Two lambdas on one line still agree; a closure's copies over other captured values, and a
    function's over other defaults, are told apart by its cells and defaults
    (:func:`call_fields`), not here. A function Cython compiled is written so too
    (``<cyfunction pkg.fast.scale>``): its text named it without its module.

    A built-in function is written by its module and name too (``<built-in function
    math.sqrt>``), one of a type by the type's (``<built-in method builtins.dict.fromkeys>``):
    their text named neither, so ``math.sqrt`` and ``cmath.sqrt`` agreed. One bound to an
    object (``",".join``, ``table.get``) is walked as a bound method is (:func:`call_fields`):
    its text named the object's type alone, so ``",".join`` and ``";".join`` agreed.
    """
    if isinstance(value, types.ModuleType):
        return f"<module {value.__name__!r}>"
    if isinstance(value, types.BuiltinFunctionType):
        return _builtin_name(value)
    if _is_function(value):
        name = f"{value.__module__}.{value.__qualname__}"
        if "<" in value.__qualname__:  # <lambda>, <locals>: not one function of its module
            name += f" line {value.__code__.co_firstlineno}"
        kind = "function" if isinstance(value, types.FunctionType) else "cyfunction"
        return f"<{kind} {name}>"
    return None


#: the types of a function Cython compiled (``_cython_3_0_11.cython_function_or_method``): one
#: module of that name per Cython version, so known by their names
_CYTHON_FUNCTIONS = frozenset({"cython_function_or_method", "fused_cython_function"})


def _is_function(value: Any) -> bool:
    """Whether ``value`` is a Python function or one Cython compiled: its text
    (``<cyfunction scale at 0x..>``) less its address was its qualified name alone, so two
    modules' compiled ``scale`` agreed, and so did one's copies over other defaults."""
    if isinstance(value, types.FunctionType):
        return True
    return type(value).__name__ in _CYTHON_FUNCTIONS and hasattr(value, "__code__")


def _builtin_name(value: types.BuiltinFunctionType) -> str | None:
    """The text of a built-in function of a module or a type (see :func:`code_name`), or None
    for one bound to an object."""
    owner = value.__self__
    if owner is None or isinstance(owner, types.ModuleType):
        module = value.__module__ or getattr(owner, "__name__", "builtins")
        return f"<built-in function {module}.{value.__qualname__}>"
    if isinstance(owner, type):  # the type it was looked up on, not the one defining it
        return f"<built-in method {owner.__module__}.{owner.__qualname__}.{value.__name__}>"
    return None


def type_name(value: Any) -> str:
    """The module-qualified name of ``value``'s type (``builtins.int``)."""
    return f"{type(value).__module__}.{type(value).__qualname__}"


def call_fields(value: Any) -> dict[str, Any] | None:
    """The fields a ``functools.partial`` (its ``func``, ``args`` and ``keywords``), a bound method
    (its function and the object it is bound to: ``func``, ``self``; a built-in one's function by
    its type's module-qualified name and its own) or a closure or a function with defaults (its
    :func:`code_name`, what it captured and its default arguments, each as :func:`held` writes it:
    ``func``, ``closure``, ``defaults``), or a wrapper of no text of its own (``functools.cache``'s:
    the function it wraps as ``func``, its public attributes) is written by, as an object's are
    (:func:`~distconv.plain_json.fields_of`), or None where ``value`` is none of them. Their repr
    wrote a partial's function without its module and its arguments by their repr (a set in its
    process's hash order, an array summarised past 1000 values, an object with no text of its own as
    its class's name), and a method's object by its repr: walked, each is written as it would be
    alone, and an object that holds its own method is no endless walk (its second visit is
    ``"..."``). A closure was its name alone: two made by one factory over other values agreed (two
    ranks whose configs differ there passed the job check). A ``singledispatch`` function and a
    ``singledispatchmethod`` are written by their registries (:func:`_dispatch_method`)."""
    if isinstance(value, functools.partial):
        return {"func": value.func, "args": list(value.args), "keywords": dict(value.keywords)}
    if isinstance(value, types.MethodType):
        return {"func": value.__func__, "self": value.__self__}
    if is_bound_builtin(value):  # its text named the object's type alone (",".join)
        owner = value.__self__
        return {"func": f"<built-in method {type_name(owner)}.{value.__name__}>", "self": owner}
    if (method := _dispatch_method(value)) is not None:
        return method
    if _is_function(value):
        if (registry := _dispatch_registry(value)) is not None:
            return {"func": _wrapped(value) or code_name(value), "registry": registry}
        kept = {"closure": closure_values(value), "defaults": _defaults(value)}
        kept = {what: found for what, found in kept.items() if found}
        return {"func": code_name(value), **kept} if kept else None
    if callable(value) and type(value).__repr__ is object.__repr__:  # no text of its own
        wrapped = _wrapped(value)  # functools.cache's wrapper: its function
        if wrapped is not None:
            return {"func": wrapped, **public_attributes(value)}
    return None


def _dispatch_registry(function: Any) -> dict[str, Any] | None:
    """A ``functools.singledispatch`` function's registry (it has ``registry`` and
    ``dispatch``): each registered type's module-qualified name -> its function, or None for
    any other function; in the order of those names, not the order registered (another on a
    rank whose modules registered in another order: refused), and a name two types share (two
    local classes of one factory) numbered in the order of their functions' names
    (:func:`code_name`, else their type's: ``mod.make.<locals>.A 2``): keyed by name alone, the
    later replaced the earlier, and two registries that differ there agreed. Two functions of
    one name too (closures of one factory) keep the order registered: nothing cheaper tells
    them apart before they are written, and JSON cannot tell those types apart anyway. Its
    closure is
    not walked: it holds ``cache_token``, abc's count of registrations in the process, another
    in each process that imported other modules first (``fractions`` registers with
    ``numbers``' abstract classes), and in one once a type is registered with an abstract
    class and the function called."""
    registry, dispatch = attribute(function, "registry"), attribute(function, "dispatch")
    if not isinstance(registry, Mapping) or not callable(dispatch):
        return None
    entries = [
        (f"{kind.__module__}.{kind.__qualname__}", _entry_name(f)) for kind, f in registry.items()
    ]
    order = sorted(range(len(entries)), key=entries.__getitem__)  # stable: registered, at last
    found = list(registry.values())
    named: dict[str, Any] = {}
    for at in order:
        named[unused_name(entries[at][0], named)] = found[at]
    return named


def _entry_name(function: Any) -> str:
    """What a registry's entries of one type name are ordered by: ``function``'s name
    (:func:`code_name`), else its type's; read, not walked (it may hold the registry)."""
    try:
        return code_name(function) or type_name(function)
    except Exception:  # an attribute of its own that raises: its type's name alone
        return type_name(function)


def unused_name(base: str, used: Container[str]) -> str:
    """``base``, or where ``used`` holds it the first of ``base 2``, ``base 3``, ... it does
    not: a name several entries share, each kept under its own, numbered in an order every
    rank shares (a registry's, :func:`~distconv.plain_json.key_names`')."""
    name, number = base, 1
    while name in used:
        number += 1
        name = f"{base} {number}"
    return name


def _dispatch_method(value: Any) -> dict[str, Any] | None:
    """A ``functools.singledispatchmethod`` as an object or its class hands it out (Python
    3.11's function holds the object in its cell ``obj``, a later one's object as ``_obj``),
    written as a bound method: its function, its registry and the object (``self``; none from
    the class); None for any other value. By its cells' kinds, two agreed whose methods
    register other implementations, or whose objects hold other settings."""
    if not (_is_function(value) or type(value).__name__ == "_singledispatchmethod_get"):
        return None  # no attribute of any other object read: a property of its own may raise
    method = attribute(attribute(value, "register"), "__self__")
    if not isinstance(method, functools.singledispatchmethod):
        return None
    code = attribute(value, "__code__")  # a function's (Python 3.11's); none later
    cells = dict(zip(code.co_freevars, value.__closure__ or ())) if code is not None else {}
    if code is not None and (code.co_name != "_method" or "obj" not in cells):
        return None  # functools.wraps copied ``register`` onto a wrapper: its own cells
    bound = cells["obj"].cell_contents if "obj" in cells else attribute(value, "_obj")
    fields = {"func": method.func, "registry": _dispatch_registry(method.dispatcher)}
    return fields if bound is None else {**fields, "self": bound}


def _wrapped(value: Any) -> Any:
    """The function ``value`` wraps (its ``__wrapped__``), or None where it names none or
    reading it raises (a lazy handle's property, one answering from a dict of its own with
    ``KeyError``): read of every object walked, such an error stopped the job check."""
    try:
        return attribute(value, "__wrapped__")
    except Exception:  # any error of its own: no wrapper, written as any object is
        return None


def is_bound_builtin(value: Any) -> bool:
    """Whether ``value`` is a built-in method bound to an object (``",".join``, ``{}.get``) or a
    method-wrapper (``(2).__mul__``), walked as :func:`call_fields` walks a bound method."""
    return isinstance(value, types.MethodWrapperType) or (
        isinstance(value, types.BuiltinFunctionType) and _builtin_name(value) is None
    )


def _defaults(function: types.FunctionType) -> dict[str, Any]:
    """``function``'s default arguments by their parameters' names (``__defaults__``, then
    ``__kwdefaults__``): ``lambda x, k=k: x * k`` made in a loop was one text for each ``k``
    (its name and line), so two ranks whose configs differ in a default passed the job check.
    Each is written as :func:`held` writes it (``memo={}`` as ``"<dict>"``), and a private
    one (``_cache={}``, a name starting with ``_``) is left out, as an object's private
    attribute is (:func:`public_attributes`)."""
    code = function.__code__
    given = function.__defaults__ or ()
    names = code.co_varnames[: code.co_argcount]
    found = dict(zip(names[len(names) - len(given) :], given))
    found.update(function.__kwdefaults__ or {})
    return {name: held(value) for name, value in found.items() if name[:1] != "_"}


def closure_values(function: types.FunctionType) -> dict[str, Any]:
    """What ``function`` captured, by the name its code reads it by, each as :func:`held`
    writes it (a memo's ``cache = {}`` as ``"<dict>"``), one its code rebinds (``nonlocal
    calls``) or another function sharing the cell does (a factory's ``count`` beside its
    ``read``: :func:`~distconv.plain_cells.rebound_names`) by its type's name alone
    (``"<int>"``): the value it holds is the count of calls. A cell not yet set (a name its
    factory assigns after making it) is left out, and a private one (``_seen``, a name
    starting with ``_``), as an object's private attribute is (:func:`public_attributes`), and
    so ``__class__`` (which a method's name tells already): the rule of kinds (:func:`held`)
    is on top of the rule of names, not in its place."""
    found: dict[str, Any] = {}
    if not function.__closure__:
        return found
    code, rebound = function.__code__, rebound_names(function)
    for name, cell in zip(code.co_freevars, function.__closure__):
        if name[:1] == "_":
            continue
        try:
            value = cell.cell_contents
        except ValueError:  # empty: nothing captured yet
            continue
        found[name] = _kind(value) if name in rebound else held(value)
    return found


def held(value: Any, depth: int = 0) -> Any:
    """A cell's or a default's value as it is written: as itself where it is of a kind that
    does not change with use (None, a bool, a number, a string, bytes, a numpy scalar, a
    class, a module, an enum member, a range, a path, a Decimal or Fraction, a date,
    time or timedelta, a function, whose own cells and defaults are written by this rule, a
    tuple, frozenset or slice of such, a ``functools.partial`` whose function and arguments
    are, each nested no deeper than :data:`HELD_DEPTH`); an array by its dtype and shape (its
    values are written in place: ``{"dtype": "float32", "shape": [3]}``); any other value (a
    dict, a list, a set, an object) by its type's name alone (``"<dict>"``), whatever it
    holds.
    Written with what they held, a memo decorator's ``cache = {}`` or a list default filled in
    made ranks that agree refuse each other at the job check once one had called it (a dry
    step on rank 0), which blocks a correct job; two configs that differ only in what such a
    value holds now agree, which the job check misses."""
    if isinstance(value, _FIXED) or _is_function(value) or _is_scalar(value):
        return value
    if isinstance(value, types.BuiltinFunctionType) and _builtin_name(value) is not None:
        return value  # math.sqrt, dict.fromkeys: not bound to an object
    if depth >= HELD_DEPTH and isinstance(value, _NESTING):  # a walk a few calls a level
        return _kind(value)
    if isinstance(value, (tuple, frozenset)) and all(held(v, depth + 1) is v for v in value):
        return value
    ends = (value.start, value.stop, value.step) if isinstance(value, slice) else None
    if ends is not None and all(held(v, depth + 1) is v for v in ends):
        return value  # slice(0, a_list) is written by its text, which the list's changes change
    if isinstance(value, functools.partial) and _held_partial(value, depth + 1):
        return value
    shape = _array_shape(value)
    return shape if shape is not None else _kind(value)


#: the kinds of value :func:`held` writes as themselves: none changes with use
_FIXED = (type(None), bool, int, float, complex, str, bytes, type, types.ModuleType, enum.Enum)
_FIXED += (range, pathlib.PurePath, decimal.Decimal, fractions.Fraction)
_FIXED += (datetime.date, datetime.time, datetime.timedelta)


def _held_partial(value: functools.partial, depth: int) -> bool:
    """Whether :func:`held` writes the partial ``value`` as itself: its function and every
    argument it binds are written so (``partial(scale, factor=2)``), at ``depth``."""
    bound = (value.func, *value.args, *value.keywords.values())
    return all(held(v, depth) is v for v in bound)


#: how deep :func:`held` walks tuples, frozensets, slices and partials inside one another: a
#: value nested deeper than this is written by its type's name, whole (each level costs a few
#: calls: a chain some 140 deep was refused as too deep, before a config's own limit); deep
#: enough that settings nested as a config nests them are written by value
HELD_DEPTH = 32
#: what nests other values, written by its type's name past :data:`HELD_DEPTH`
_NESTING = (tuple, frozenset, slice, functools.partial)


def _kind(value: Any) -> str:
    """``value``'s type's name, as :func:`held` writes a value that may change with use."""
    return f"<{type(value).__qualname__}>"


def _is_scalar(value: Any) -> bool:
    """Whether ``value`` is a numpy scalar (``np.float32(2)``), known without importing numpy."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.generic)


def _array_shape(value: Any) -> dict[str, Any] | None:
    """An array's dtype and shape (numpy's, or one that speaks DLPack or lives on a GPU: a
    torch tensor, a cupy array), or None for any other value; read without its
    ``__getattr__``, an error there taken as no array."""
    numpy = sys.modules.get("numpy")
    try:
        if not (numpy is not None and isinstance(value, numpy.ndarray)):
            if attribute(value, "__dlpack__") is None:
                if attribute(value, "__cuda_array_interface__") is None:
                    return None
        dtype, shape = attribute(value, "dtype"), attribute(value, "shape")
    except Exception:  # a property of its own raising: no array of ours
        return None
    if dtype is None or not isinstance(shape, tuple):
        return None
    return {"dtype": str(dtype), "shape": [int(n) for n in shape]}


def public_attributes(value: Any) -> dict[str, Any]:
    """``value``'s public attributes (``__dict__``, then ``__slots__``; a name not starting with
    ``_``), each read by :func:`attribute`. A private one holds the process's own state (a
    prefetch thread, a lock, a cache): walked, ranks that agree were refused, and every resume."""
    unset = object()
    found = {k: v for k, v in (attribute(value, "__dict__") or {}).items() if k[:1] != "_"}
    for owner in type(value).__mro__:
        slots = owner.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot[:1] != "_" and (got := attribute(value, slot, unset)) is not unset:
                found.setdefault(slot, got)
    return found


def attribute(value: Any, name: str, missing: Any = None) -> Any:
    """``value``'s attribute ``name`` as Python's own lookup finds it (its class's descriptors,
    its ``__dict__``), or ``missing`` where it has none; never through its class's
    ``__getattr__``, which an unset slot or field fell to: one answering from a dict of its
    own (``KeyError``) refused the config with a bare error naming nothing, and one answering
    any name wrote what it made up (a method's object, walked, reached both)."""
    try:
        return object.__getattribute__(value, name)
    except AttributeError:
        return missing
