"""The source of the instruction an error was raised at, read only where it failed: what a
line wrote in place, or which parameter's gradient it touched, found without running code
(names, an object's ``__dict__``, an Arg's values)."""

from __future__ import annotations

import ast
import linecache
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import is_array


def failing_span(frame: Any, lasti: int) -> ast.stmt | None:
    """The source of ``frame``'s instruction at ``lasti``, parsed: an augmented assignment, a
    call, an expression; None where it cannot be read (a compiled frame, code with no source
    file, exec'd; Python 3.10 keeps no columns) or does not parse alone."""
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is None:
        return None
    first, last, start, end = list(positions())[lasti // 2]
    lines = linecache.getlines(frame.f_code.co_filename)[first - 1 : last] if first else []
    if not lines or start is None or end is None:
        return None
    # columns count UTF-8 bytes: a "µ" before the target, read as characters, cut it wrong
    spans = [line.encode() for line in lines]
    spans[-1] = spans[-1][:end]
    spans[0] = spans[0][start:]
    try:  # a long line's tree is built deep in the stack (a Trainer's, a notebook's): it may
        # run out of depth where the line compiled at import, and the layer's error is the one
        return ast.parse(b"".join(spans).decode(errors="replace").strip()).body[0]
    except (SyntaxError, ValueError, IndexError, RecursionError, MemoryError):
        return None


def written_target(node: ast.stmt) -> ast.expr | None:
    """What ``node`` writes in place: an augmented assignment's target, a call's ``out=``;
    None where it writes nothing so."""
    if isinstance(node, ast.AugAssign):
        return node.target
    call = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.Return)) else None
    outs = [k.value for k in getattr(call, "keywords", ()) if k.arg == "out"]
    return outs[0] if outs else None


def resolve(expr: ast.expr, names: dict[str, Any]) -> Any:
    """What ``expr`` (a name, its attributes, a slice of one) holds, read without running
    code of its own (an object's ``__dict__``, an Arg's values); None where it cannot be."""
    if isinstance(expr, ast.Name):
        return names.get(expr.id)
    if isinstance(expr, ast.Subscript):  # a view: it shares the array's memory
        return resolve(expr.value, names)
    if isinstance(expr, ast.Attribute):
        owner = resolve(expr.value, names)
        if issubclass(type(owner), Arg):
            return owner.value if expr.attr == "value" else None
        try:  # not getattr: a __getattr__ of one's own ran (one with __slots__), and raised
            attrs = object.__getattribute__(owner, "__dict__")
        except AttributeError:
            return None
        return attrs.get(expr.attr) if isinstance(attrs, (dict, MappingProxyType)) else None
    return None


def plain_array(value: Any) -> bool:
    """Whether ``value`` is numpy's or cupy's array (or scalar), told first by its type: any
    other object's ``dtype`` or ``shape`` (a property, a ``__getattr__`` of one's own) is not
    run to ask, which raised out of an error's reading."""
    kind = type(value)
    known = issubclass(kind, (np.ndarray, np.generic)) or kind.__module__.startswith("cupy")
    return known and is_array(value)


def touches_grad_of(exc: BaseException, params: Iterable[Any]) -> bool | None:
    """Whether a line ``exc`` passed through reads or writes the ``.grad`` of one of
    ``params`` (``p.grad += ...``, ``self.w.grad[...]``, ``out=self.w.grad``), or adds into
    a variable holding None (``g = self.w.grad; g += ...``); None where a line of them cannot
    be read (exec'd code, a .pyc alone, a line too long to parse): the base's own line always
    can, and a layer's unread line was answered False. Each line on the way is read, not
    only the innermost: numpy's own Python code may be where it was raised."""
    ids, unread, tb = {id(p) for p in params}, False, exc.__traceback__
    while tb is not None:
        node, names = failing_span(tb.tb_frame, tb.tb_lasti), tb.tb_frame.f_locals
        tb = tb.tb_next
        if node is None:
            unread = True
            continue
        target = written_target(node)
        if isinstance(target, ast.Name) and target.id in names and names[target.id] is None:
            return True
        if any(
            isinstance(n, ast.Attribute) and n.attr == "grad" and id(resolve(n.value, names)) in ids
            for n in ast.walk(node)
        ):
            return True
    return None if unread else False
