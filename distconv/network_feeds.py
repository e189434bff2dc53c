"""What is wrong with a feed of a :class:`~distconv.network.Network`, worded for the
``NetworkError`` the network raises: one of a type no layer reads, holding NaN or infinity,
or integer values a layer computing in floating point was given.

Each function answers with the message, or None where the feed is fine, as
:func:`distconv.parameter.callback_problem` does for a callback: the network raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distconv.arg import Arg
from distconv.backend import ARRAY_KINDS, get_array_module, is_array, is_float_dtype
from distconv.layers.feed_errors import feed_to_blame


def arg_problem(name: str, arg: Any) -> str | None:
    """Why ``arg``, fed as ``name``, cannot be read: neither an Arg nor an array, an Arg with
    neither a value nor ids, or one whose value or ids is no array; None if it can."""
    if not isinstance(arg, Arg):
        if not is_array(arg):  # a torch tensor: "Cannot interpret 'torch.float32' ..."
            return (
                f"input {name!r} must be an Arg or an array, got {type(arg).__name__} "
                f"({ARRAY_KINDS})"
            )
        return None
    if arg.value is None and arg.ids is None:
        return f"input {name!r} is an Arg with neither a value nor ids"
    for field in ("value", "ids"):  # Arg reads a list of ids as an array, not a tensor
        v = getattr(arg, field)
        if v is not None and not is_array(v):
            return (
                f"input {name!r}: Arg.{field} must be an array, got {type(v).__name__} "
                f"({ARRAY_KINDS})"
            )
    return None


def not_finite_problem(name: str, value: Any) -> str | None:
    """Why feed ``name``'s ``value`` (None: an Arg of ids) cannot be trained on: a float array
    holding NaN or infinity, counted; None where it holds neither or is no float array."""
    if value is None or not is_float_dtype(value.dtype):
        return None
    xp = get_array_module(value)
    if bool(xp.isfinite(value).all()):
        return None
    bad = int((~xp.isfinite(value)).sum())
    return f"input {name!r} of shape {tuple(value.shape)} holds {bad} NaN or infinite values"


def integer_input_problem(
    label: str, inputs: Sequence[str], args: list[Arg], exc: TypeError
) -> str | None:
    """Why the layer ``label`` reading ``inputs`` (their Args ``args``) failed with ``exc``,
    where it is a casting error of a feed's integer values (a layer's, numpy's); None where
    the error is the layer's own."""
    blamed = feed_to_blame(exc, inputs, args)
    if blamed is None:
        return None
    return (
        f"layer {label}: input {blamed[0]!r} holds {blamed[1]} values, but the layer computes "
        f"in floating point; feed float arrays (images as x.astype(np.float32) / 255) or "
        f"integer ids as Arg(ids=...)"
    )
