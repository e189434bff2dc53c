"""Whose error it is: a callback's (a sync's, an optimizer's) passes a layer's backward as it
is; anything else raised there is the layer's, and is named after it.

Told apart by the traceback, walked only on failure: the callback runs below a parameter's
``inc_update``, or below the callback's own code where a layer calls the callback itself (a
C function, which runs in no frame of its own, is given one: :func:`in_frame`)."""

from __future__ import annotations

import functools
from typing import Any

from distconv.parameter import Parameter, UpdateCallback

_INC_UPDATE = Parameter.inc_update.__code__


def _code_of(callback: Any) -> Any:
    """The code a call of ``callback`` runs first: a function's or a bound method's, the
    function's under a ``functools.partial``, or ``__call__``'s for a callable object (a sync
    strategy); None for a C function, which runs in no frame of its own."""
    while isinstance(callback, functools.partial):
        callback = callback.func
    fn = getattr(callback, "__func__", callback)
    code = getattr(fn, "__code__", None)
    if code is None:  # an object's __call__ (a slot wrapper for a C type: no code)
        call = getattr(type(fn), "__call__", None)  # noqa: B004  (its code, not callable())
        code = getattr(getattr(call, "__func__", call), "__code__", None)
    return code


def in_frame(callback: UpdateCallback) -> UpdateCallback:
    """``callback``, or where it has no code of its own (a C function, a ufunc, a bound method
    of a C type such as ``list.remove``, an object or ``functools.partial`` around one) a
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
