"""The source of the instruction an error was raised at, read only where it failed: what a
line wrote in place, or which parameter's gradient it touched, found without running code
(names, an object's ``__dict__``, an Arg's values)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from itertools import islice
from types import (
    FrameType,
    GetSetDescriptorType,
    MappingProxyType,
    MemberDescriptorType,
    TracebackType,
)
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import is_array
from distconv.layers.line_statements import (
    source_lines,
    span_statement,
    statement_at,
    statement_lines,
)

#: the code of a scope inside a statement, whose frame holds its own names only: a statement
#: read for it whole is read with the enclosing frame's names too (:func:`frame_names`), else
#: ``x`` of ``x.grad = [c * 2 for c in cs]`` was unreadable, its ``x.grad`` taken for a frozen
#: weight's
_INNER_SCOPES = frozenset({"<lambda>", "<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})


def failing_span(tb: TracebackType) -> ast.stmt | None:
    """The source of the instruction traceback entry ``tb`` failed at, parsed: an augmented
    assignment, a call, an expression; None where it cannot be read (a compiled frame, code
    with no source file, exec'd) or does not parse alone. Read by the instruction's columns
    where Python keeps them (3.11+), else as the statement its line belongs to
    (:func:`~distconv.layers.line_statements.statement_at`: Python 3.10, ``-X
    no_debug_ranges``); a comprehension's or a lambda's frame only where its caller runs
    that statement (None: a lambda called, a generator consumed, elsewhere), its names read
    with the caller's (:func:`frame_names`). ``g[...] += s`` fails reading
    ``g[...]``, which alone writes nothing: the statement is read then."""
    frame, lasti = tb.tb_frame, tb.tb_lasti
    code, scope = frame.f_code, frame.f_globals  # its module's loader reads a zip's source
    if lasti < 0:  # a traceback made by hand may hold -1: no instruction
        return None
    positions = getattr(code, "co_positions", None)
    # from the failing instruction on: the whole list was built per frame, O(the code's size)
    at = islice(positions(), lasti // 2, None) if positions is not None else iter(())
    here = next(at, (None,) * 4)
    if here[2] is None or here[3] is None:  # no columns kept: the line's statement
        if code.co_name in _INNER_SCOPES and _enclosing(frame, tb.tb_lineno) is None:
            return None  # its names are not the statement's, and no caller's are: unread
        return statement_at(code.co_filename, tb.tb_lineno, scope)
    lines = source_lines(code.co_filename, scope)
    node = span_statement(lines, *here)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Subscript):
        first, last, start, end = here  # the next span that starts there, longer
        around = (
            p for p in at if None not in p and p[::2] == (first, start) and p[1:4:2] > (last, end)
        )
        whole = span_statement(lines, *next(around, (None,) * 4))
        ends = (last - first + 1, end - (start if last == first else 0))  # in the read text
        if isinstance(whole, ast.AugAssign) and ends == (
            whole.target.end_lineno,
            whole.target.end_col_offset,
        ):
            return whole  # whose target is the span read
    return node


def frame_names(tb: TracebackType, node: ast.AST | None = None) -> dict[str, Any]:
    """The names ``node``, the line of traceback entry ``tb``, is read with: its frame's, but
    those a comprehension or a lambda in ``node`` binds of its own, which are not the frame's
    (``g = p.grad; [np.negative(g, out=g) for g in own]`` writes ``own``, not ``p.grad``):
    unread there, as the scope's own frame reads them. A comprehension's or a lambda's frame
    (read whole where no columns are kept: ``x.grad = [g * 2 for g in gs]``) has its own names
    over those of each frame it runs inside on the same statement (:func:`_callers`), less
    those the scopes in ``node`` bind: a nested comprehension's ``g`` is neither the outer
    one's nor the function's."""
    frame = tb.tb_frame
    bound = _bound_inside(node) if node is not None else set()
    if frame.f_code.co_name not in _INNER_SCOPES:
        return {k: v for k, v in frame.f_locals.items() if k not in bound}
    callers = _callers(frame, tb.tb_lineno)
    return {**{k: v for k, v in callers.items() if k not in bound}, **frame.f_locals}


def _callers(frame: FrameType, lineno: int | None) -> dict[str, Any]:
    """The names of the frames ``frame`` (a comprehension's, a lambda's, at line ``lineno``)
    runs inside on the same statement (:func:`_enclosing`), the nearest's over the others'."""
    names: dict[str, Any] = {}
    outer = _enclosing(frame, lineno)
    while outer is not None:
        names = {**outer.f_locals, **names}
        inner = outer.f_code.co_name in _INNER_SCOPES
        outer = _enclosing(outer, outer.f_lineno) if inner else None
    return names


def _bound_inside(node: ast.AST) -> set[str]:
    """The names a comprehension's targets or a lambda's parameters in ``node`` bind."""
    bound: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            bound.update(t.id for t in ast.walk(n.target) if isinstance(t, ast.Name))
        elif isinstance(n, ast.Lambda):
            a = n.args
            extra = [x for x in (a.vararg, a.kwarg) if x is not None]
            bound.update(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *extra])
    return bound


def _enclosing(frame: FrameType, lineno: int | None) -> FrameType | None:
    """The caller of ``frame`` (a comprehension's, a lambda's, at line ``lineno``) where it
    runs the same statement of the same file, as a comprehension's caller does; None where it
    does not (a lambda called elsewhere, a generator consumed elsewhere) or it cannot tell."""
    outer, filename = frame.f_back, frame.f_code.co_filename
    if outer is None or outer.f_code.co_filename != filename:
        return None
    here = statement_lines(filename, lineno, frame.f_globals)
    there = statement_lines(filename, outer.f_lineno, outer.f_globals)
    return outer if here is not None and here == there else None


def written_target(node: ast.stmt) -> ast.expr | None:
    """What ``node`` writes in place: an augmented assignment's target, a call's ``out=``, or
    in a statement read whole (no columns kept) the ``out=`` of the one call in it given one
    (``y = np.add(a, b, out=c) + d``); None where it writes nothing so, or two calls do."""
    if isinstance(node, ast.AugAssign):
        return node.target
    outs = [k.value for c in failing_calls(node) for k in c.keywords if k.arg == "out"]
    return outs[0] if len(outs) == 1 else None


def failing_calls(node: ast.stmt) -> list[ast.Call]:
    """The calls of ``node`` that may have failed: the call a span read by columns is, or each
    call of a statement read whole, no columns kept (``y = np.add(a, b, out=c) + d``)."""
    value = node.value if isinstance(node, (ast.Expr, ast.Assign, ast.Return)) else None
    if isinstance(value, ast.Call):
        return [value]
    return [n for n in ast.walk(value or node) if isinstance(n, ast.Call)]


def resolve(expr: ast.expr, names: dict[str, Any], unread: Any = None) -> Any:
    """What ``expr`` (a name, its attributes, a slice of an array, an item of a list, tuple
    or dict) holds, read without running code of its own (an object's ``__dict__``, an Arg's
    values); ``unread`` where it cannot be (a property, a call, an object's own ``[]``)."""
    if isinstance(expr, ast.Name):
        return names.get(expr.id, unread)
    if isinstance(expr, ast.Subscript):
        owner = resolve(expr.value, names, unread)
        if plain_array(owner):  # a view: it shares the array's memory
            return owner
        key = _key(expr.slice, names)
        if type(owner) is dict and _one_of(type(key), int, str):  # exactly: theirs run no code
            return owner.get(key, unread)
        if (
            _one_of(type(owner), list, tuple)
            and type(key) is int
            and -len(owner) <= key < len(owner)
        ):
            return owner[key]
        return unread
    if isinstance(expr, ast.Attribute):
        owner = resolve(expr.value, names, unread)
        if issubclass(type(owner), Arg):
            return arg_value(owner, unread) if expr.attr == "value" else unread
        attrs = _own_dict(owner)
        return attrs.get(expr.attr, unread) if attrs is not None else unread
    return unread


_ARG_VALUE = Arg.__dict__["value"]


def arg_value(arg: Arg, unread: Any = None) -> Any:
    """``arg``'s values, read from Arg's own slot: an Arg subclass's ``value`` property (one
    that loads them) is not run; ``unread`` where the slot holds nothing."""
    try:
        return _ARG_VALUE.__get__(arg)
    except AttributeError:
        return unread


def _own_dict(owner: Any) -> Any:
    """``owner``'s attributes, read through the slot Python made for them: neither getattr
    (a ``__getattr__`` of one's own ran, one with ``__slots__``, and raised) nor a ``__dict__``
    of one's own (a lazy proxy's property, which loads what it stands for, and raised); None
    where it has none."""
    slot = class_attr(type(owner), "__dict__")
    if _one_of(type(slot), GetSetDescriptorType, MemberDescriptorType):  # Python's, a module's
        attrs = slot.__get__(owner)
        return attrs if _one_of(type(attrs), dict, MappingProxyType) else None
    return None


def _one_of(kind: type, *kinds: type) -> bool:
    """Whether ``kind`` is one of ``kinds``, by identity: ``kind in kinds`` compares with
    ``==``, which runs a metaclass's own ``__eq__`` (the reflected one, first)."""
    return any(kind is k for k in kinds)


def _key(expr: ast.expr, names: dict[str, Any]) -> Any:
    """An index written as a constant (``["b"]``, ``[-1]``) or held by a variable; None else."""
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        value = _key(expr.operand, names)
        return -value if type(value) is int else None
    if isinstance(expr, ast.Constant):
        return expr.value
    return names.get(expr.id) if isinstance(expr, ast.Name) else None


#: a class's MRO and attributes, read as Python made them: ``kind.__mro__`` and ``vars(kind)``
#: run a metaclass's own ``__getattribute__`` (or a property of it)
_MRO, _CLASS_DICT, _MODULE = (type.__dict__[k] for k in ("__mro__", "__dict__", "__module__"))


def class_attr(kind: type, name: str) -> Any:
    """``name`` as the first class of ``kind``'s MRO defines it, not bound (a function, a
    descriptor) and run by nothing of one's own; None where none defines it."""
    for base in _MRO.__get__(kind):
        attrs = _CLASS_DICT.__get__(base)
        if name in attrs:
            return attrs[name]
    return None


def plain_array(value: Any) -> bool:
    """Whether ``value`` is numpy's or cupy's array (or scalar), told first by its type: any
    other object's ``dtype`` or ``shape`` (a property, a ``__getattr__`` of one's own) is not
    run to ask, which raised out of an error's reading; nor is its class's ``__module__``
    (a metaclass's own, or None: "'NoneType' object has no attribute 'startswith'")."""
    kind = type(value)
    if not issubclass(kind, (np.ndarray, np.generic)):
        try:  # from its dict, or a C type's name (cupy's): as Python made it
            module = _MODULE.__get__(kind)
        except AttributeError:
            return False
        if type(module) is not str or module.partition(".")[0] != "cupy":
            return False
    return is_array(value)


def touches_grad_of(exc: BaseException, params: Iterable[Any]) -> bool | None:
    """Whether a line ``exc`` passed through reads or writes the ``.grad`` of one of
    ``params`` (``p.grad += ...``, ``self.w.grad[...]``, ``out=self.w.grad``), or adds into
    a variable holding None (``g = self.w.grad; g += ...``, ``grads[1] += ...`` of a list of
    gradients); None where a line reads a ``.grad`` whose owner cannot be read (a
    property's, ``parameters()[1]``, an object's own ``[]``). A line that cannot be read
    (exec'd code, a .pyc alone, a line too long to parse) tells nothing: where no line
    says, the answer is False, and the error is left as it is, not guessed at. Each line on
    the way is read, not only the innermost: numpy's own Python code may be where it was
    raised."""
    ids, unknown, tb = {id(p) for p in params}, False, exc.__traceback__
    while tb is not None:
        node = failing_span(tb)
        names = frame_names(tb, node)
        tb = tb.tb_next
        if node is None:
            continue
        target = written_target(node)
        while isinstance(target, (ast.Name, ast.Subscript)):  # g, grads[1], grads[1][...]
            if resolve(target, names, ...) is None:
                return True
            target = getattr(target, "value", None)
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and n.attr == "grad":
                owner = resolve(n.value, names, ...)
                if id(owner) in ids:
                    return True
                unknown = unknown or owner is ...
    return None if unknown else False
