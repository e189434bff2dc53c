"""Whose error it is: a callback's (a sync's, an optimizer's) passes a layer's backward as it
is; anything else raised there is the layer's, and is named after it.

Told apart by the traceback, walked only on failure: the callback runs below a parameter's
``inc_update``, or below the callback's own code where a layer calls the callback itself (a
C function, which runs in no frame of its own, is given one: :func:`in_frame`)."""

from __future__ import annotations

from types import FunctionType, MethodType
from typing import Any

from distconv.layers.source_spans import class_attr
from distconv.parameter import Parameter, UpdateCallback

_INC_UPDATE = Parameter.inc_update.__code__


def _code_of(callback: Any) -> Any:
    """The code a call of ``callback`` runs first: a function's or a bound method's, or
    ``__call__``'s for a callable object (a sync strategy); None for a C function, which runs
    in no frame of its own, or anything else (a ``functools.partial``: framed then, at the
    cost of a call). Told by exact types and the class's own ``__call__``: run each step,
    ``getattr(callback, "__func__", ...)`` ran a callback's own ``__getattr__`` (a proxy's,
    a sync strategy's delegating), whose KeyError came out of every backward."""
    if type(callback) is MethodType:
        callback = callback.__func__
    if type(callback) is not FunctionType:  # an object's __call__, if a function
        callback = class_attr(type(callback), "__call__")
    return callback.__code__ if type(callback) is FunctionType else None


def in_frame(callback: UpdateCallback) -> UpdateCallback:
    """``callback``, or where it has no code of its own (a C function, a ufunc, a bound method
    of a C type such as ``list.remove``, an object around one, any ``functools.partial``) a
    function calling it: its error showed no frame of its own in the traceback, and a layer
    that called it itself had it taken for its own ("backward: list.remove(x): x not in
    list", a LayerError). A Python function, as the Network's is, costs no call."""
    if _code_of(callback) is not None:
        return callback

    def framed(param: Parameter) -> None:
        callback(param)

    return framed


def through_callback(exc: BaseException, callback: UpdateCallback) -> bool:
    """Whether ``exc`` was raised in ``callback``: below a parameter's ``inc_update``, or below
    the callback's own code (the Network's is a function), which a layer may call itself."""
    codes, tb = {id(_INC_UPDATE), id(_code_of(callback))}, exc.__traceback__  # equal lambdas
    while tb is not None and id(tb.tb_frame.f_code) not in codes:
        tb = tb.tb_next
    return tb is not None
