"""Whose a layer's TypeError in forward is: a feed's, where numpy refused to compute with its
integer or bool values (a casting error, a bool's arithmetic), or the layer's own.

Told apart by numpy's words and by the arrays the failing line held (:func:`refused_arrays`),
read only where a forward failed: nothing on the healthy path."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module, is_array
from distconv.layers.base import LayerResultError, LayerTypeError, told
from distconv.layers.source_spans import (
    arg_value,
    failing_span,
    frame_names,
    plain_array,
    resolve,
    written_target,
)

#: numpy's and cupy's refusals of integer or bool values, whole phrases ("Cannot cast ufunc
#: 'add' output ...", CuPy 11's and older numpy's "... could not be coerced to provided output
#: parameter", "numpy boolean negative ...", CuPy 13's "cupy boolean negative ..."):
#: "broadcast" holds "cast", and a layer's own "broadcast_to() missing 1
#: required positional argument" was blamed on its integer feed; "ufunc" alone is in numpy's
#: words for a layer's own mistake too, np.tanh(x) of an Arg ("loop of ufunc does not support
#: argument 0 of type Arg"), which is no feed's
_CASTING = re.compile(
    r"\b(?:[Cc]annot cast|could not be coerced to provided|(?:numpy|cupy) (boolean))\b"
)
#: the two dtypes of a casting error, and whether a ufunc's output was cast (numpy's "output
#: from", CuPy 12-14's "output operand from": cupy/_core/_dtype.pyx _raise_if_invalid_cast)
_NAMED = re.compile(
    r"(output (?:operand )?)?from (dtype\(.+?\)) to (dtype\(.+?\))(?: with| according|$)"
)
#: the provided output's typecode in CuPy 11's and older numpy's casting error
_TYPECODE = re.compile(r"provided output parameter \(typecode '(.)'\)")


def feed_to_blame(
    exc: TypeError, sources: Sequence[str], args: Sequence[Arg]
) -> tuple[str, Any] | None:
    """The feed, ``(name, dtype)``, whose integer or bool values ``exc`` refused: a layer's
    refusal (:class:`LayerTypeError`) or numpy's casting error; None for any other error,
    which is the layer's own (a :class:`LayerResultError` too), or where no input holds
    such values. numpy's refusal of a bool's arithmetic is a bool feed's: not an integer
    feed's wired before it."""
    kinds, text = "biu", told(exc)
    if isinstance(exc, LayerResultError):  # the layer's own, whatever fed it
        return None
    if not isinstance(exc, LayerTypeError):
        words = _CASTING.search(text)
        if words is None:
            return None
        kinds = "b" if words.group(1) else kinds
    held = [
        (source, arg.value.dtype)
        for source, arg in zip(sources, args)
        if getattr(arg.value, "dtype", None) is not None and arg.value.dtype.kind in kinds
    ]
    refused = _refused_dtype(text)
    suspects = refused_arrays(exc, writes=refused is not None and "output" in text)
    if suspects is not None:  # by identity: a layer's own buffer of a feed's dtype is no feed's
        values = dict(zip(sources, (arg.value for arg in args)))
        held = [h for h in held if any(_shared(values[h[0]], a) for a in suspects)]
    if refused is not None:  # numpy named the dtype it refused: that feed's, or none's
        return next((h for h in held if refused(h[1])), None)
    # the one whose dtype the layer's refusal names (values_of's "got int32 values"): not an
    # int64 feed wired before, which the layer takes as values by its own choice
    named = (h for h in held if repr(h[1]) in text or f"got {h[1]} values" in text)
    return next(named, held[0] if held else None)


def refused_arrays(exc: BaseException, *, writes: bool) -> list[Any] | None:
    """The arrays the code that raised ``exc`` may have refused, read from the innermost
    frame that holds any (cupy's compiled frames hold none): where it ``writes`` (an output
    numpy could not cast into), the one its line writes in place (``x += ...``, ``out=x``),
    if the line says, and none where it cannot be read (exec'd code): an array the line
    wrote is not guessed at; else each array, or an Arg's values, in its variables. None
    where ``exc`` was never raised, or they hold too many to read. A dtype alone blamed a
    feed for the layer's own buffer of its dtype (``self.count += ...`` told "input
    'labels' holds int64 values")."""
    entries, tb = [], exc.__traceback__
    if tb is None:
        return None
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    for entry in reversed(entries):
        found = _arrays(entry.tb_frame.f_locals.values())
        if writes:
            node = failing_span(entry)
            target = _written(node, frame_names(entry, node)) if node is not None else None
            if target is not None:  # the line writes: that array or (an object's own item) none
                return [target] if is_array(target) else []
            if node is None and found:  # it wrote into one of them, or none: unknown
                return []
        if found is None or found:
            return found
    return []


def _written(node: ast.stmt, names: dict[str, Any]) -> Any:
    """What the failing statement ``node`` wrote in place, where it says (an augmented
    assignment's target, a call's ``out=``): the array, or ``...`` where the expression
    cannot be read without running code (an object's own item, a property); None where the
    line writes nothing so."""
    expr = written_target(node)
    if expr is None:
        return None
    target = resolve(expr, names)
    return target if plain_array(target) else ...


#: the most items of a frame's lists and tuples read: a forward holding a list of a million
#: ids took seconds to fail, its items read one by one
_MOST_ITEMS = 10_000


def _arrays(values: Iterable[Any]) -> list[Any] | None:
    """The arrays among ``values`` (a frame's variables): each array, an Arg's values, those
    in a tuple or list; None where these hold more than :data:`_MOST_ITEMS` items."""
    found, left = [], _MOST_ITEMS
    for value in values:
        kind = type(value)
        if issubclass(kind, (tuple, list)):  # by type: no object of one's own is asked, nor
            # its __len__ or __iter__ run (a list of one's own that loads as it is iterated)
            listed = issubclass(kind, list)
            left -= list.__len__(value) if listed else tuple.__len__(value)
            if left < 0:
                return None
            items = list.__iter__(value) if listed else tuple.__iter__(value)
            found += [a for a in map(_array, items) if a is not None]
        elif (array := _array(value)) is not None:
            found.append(array)
    return found


def _array(value: Any) -> Any:
    """``value`` where it is an array, an Arg's values where they are one; None else."""
    value = arg_value(value) if issubclass(type(value), Arg) else value
    return value if plain_array(value) else None


def _shared(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` may be one array's memory (one a view of the other)."""
    return a is b or (type(a) is type(b) and get_array_module(a).may_share_memory(a, b))


def _refused_dtype(text: str) -> Callable[[Any], bool] | None:
    """Which feed's dtype numpy's casting error refused, as a test of a dtype; None where it
    names none (a layer's own refusal, numpy's bool refusals).

    A ufunc's output cast ("... output from dtype('float64') to dtype('int64')", CuPy 13's
    "output operand from ...", CuPy 11's and older numpy's "provided output parameter
    (typecode 'l')") refused the array written in
    place: its target. Any other ("Cannot cast array data from dtype('float64') to
    dtype('int64')" of np.take given float indices, "... input 0 from ...") is a feed's only
    where its values were to be computed in floating point: the source, cast to a float."""
    named = _NAMED.search(text)
    if named is not None:
        output, source, target = named.groups()
        if output:
            return lambda dtype: repr(dtype) == target
        floating = re.search(r"float|complex", target) is not None
        return lambda dtype: floating and repr(dtype) == source
    code = _TYPECODE.search(text)
    if code is not None:
        return lambda dtype: _same(dtype, code.group(1))
    return None


def _same(dtype: Any, code: str) -> bool:
    """Whether typecode ``code`` is ``dtype`` (cupy's 'q' is numpy's int64 'l' on Linux)."""
    try:
        return bool(np.dtype(code) == dtype)
    except TypeError:
        return False
