"""What a layer's code does with its inputs: read an input's values (refusing integer values
and ids, naming the layer), find the gradient buffer of an input that wants one, and add a
fresh gradient into an input's. The helpers every layer family's ``_forward`` and
``_backward`` call; :mod:`distconv.layers.base` imports them, so a layer of one's own may
import them from there too."""

from __future__ import annotations

from typing import Any

from distconv.arg import Arg
from distconv.backend import is_float_dtype
from distconv.layers.errors import Fails, LayerTypeError


def values_of(owner: Fails, arg: Arg) -> Any:
    """``arg.value``, or a LayerError naming what came instead: the Trainer (``feeds_of``)
    feeds integer and bool arrays as ids, so integer images arrive with no values at all.
    Integer values given directly are refused too: an average pooling scaled them to zeros
    and a sigmoid truncated them, with no error."""
    if arg.value is not None:
        if not is_float_dtype(arg.value.dtype):
            message = str(owner.fail(f"expected float values, got {arg.value.dtype} values"))
            raise LayerTypeError(f"{message} (cast them to a float type, as x.astype(np.float32))")
        return arg.value
    if arg.ids is None:
        raise owner.fail("expected an input with values, got an Arg with neither values nor ids")
    raise owner.fail(  # an image or a regression target (a loss's): "/ 255" is the image's
        f"expected float values, got {arg.ids.dtype} ids (integer and bool arrays are fed as "
        "ids: cast it to a float type, images as x.astype(np.float32) / 255, a regression "
        "target as y.astype(np.float32))"
    )


def grad_target(arg: Arg) -> Any:
    """The gradient buffer of an input that wants one, or None (data, ids, static inputs)."""
    return arg.grad if arg.needs_grad else None


def add_grad(arg: Arg, g: Any) -> None:
    """Add ``g`` into ``arg``'s gradient, where ``g`` is a fresh array a kernel made, which
    nothing else holds.

    The first gradient into ``arg`` becomes its gradient as it is, instead of being added to a
    zero-filled buffer: a fill and a pass over the input saved (the pooling layers get the
    same by handing the kernel the buffer to add into). ``g`` of another dtype, shape or
    layout, or read-only, is added, so the gradient keeps the input's.
    """
    fits = (
        g.dtype == arg.value.dtype
        and g.shape == arg.value.shape
        and g.flags.c_contiguous
        # a later += must neither fail nor write into somebody's cache; cupy's flags have no
        # ``writeable`` (its arrays are never read-only): reading it raised AttributeError
        and getattr(g.flags, "writeable", True)
    )
    if arg.has_grad or not fits:
        arg.grad += g
    else:
        arg.grad = g
