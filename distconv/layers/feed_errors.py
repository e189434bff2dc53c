"""Whose a layer's TypeError in forward is: a feed's, where numpy refused to compute with its
integer or bool values (a casting error, a bool's arithmetic), or the layer's own.

Told apart by numpy's words, read only where a forward failed: nothing on the healthy path."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from distconv.arg import Arg
from distconv.layers.base import LayerTypeError

#: numpy's refusals of integer or bool values, whole phrases ("Cannot cast ufunc 'add' output
#: ...", older numpy's "... could not be coerced to provided output parameter", "numpy boolean
#: negative ..."): "broadcast" holds "cast", and a layer's own "broadcast_to() missing 1
#: required positional argument" was blamed on its integer feed; "ufunc" alone is in numpy's
#: words for a layer's own mistake too, np.tanh(x) of an Arg ("loop of ufunc does not support
#: argument 0 of type Arg"), which is no feed's
_CASTING = re.compile(r"\b(?:[Cc]annot cast|could not be coerced to provided|numpy (boolean))\b")


def feed_to_blame(
    exc: TypeError, sources: Sequence[str], args: Sequence[Arg]
) -> tuple[str, Any] | None:
    """The feed, ``(name, dtype)``, whose integer or bool values ``exc`` refused: a layer's
    refusal (:class:`LayerTypeError`) or numpy's casting error; None for any other error,
    which is the layer's own, or where no input holds such values. numpy's refusal of a
    bool's arithmetic is a bool feed's: not an integer feed's wired before it."""
    kinds, text = "biu", str(exc)
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
    # the one whose dtype numpy names ("... to dtype('bool')"): not an int64 feed wired before
    return next((h for h in held if repr(h[1]) in text), held[0] if held else None)
