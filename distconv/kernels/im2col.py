"""im2col and col2im for any number of spatial axes (2-D images, 3-D volumes alike).

The column layout is ``(N, C, *ksize, *out)``: for every sample and channel, one slab per kernel
offset holding the input pixels that offset touches at each output position. Reshaped to
``(N, C*K, L)`` (``K`` = kernel volume, ``L`` = output positions) it is the matrix a convolution
multiplies its ``(O, C*K)`` weight with.

:func:`im2col_view` builds that layout as a strided *view* of the padded input, so the caller
pays for exactly one copy, when it reshapes a chunk of samples into a matrix. :func:`col2im`
scatters columns back, adding, with one vectorised add per kernel offset (9 for 3x3), never a
loop over pixels.
"""

from __future__ import annotations

import itertools
from typing import Any

from distconv.backend import get_array_module
from distconv.kernels.shape import ConvGeometry


def _as_strided(xp: Any, a: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)


def pad_spatial(x: Any, pad: tuple[int, ...], value: float = 0.0) -> Any:
    """``x`` with ``pad[i]`` entries of ``value`` on both sides of spatial axis ``i``."""
    if not any(pad):
        return x
    xp = get_array_module(x)
    widths = [(0, 0), (0, 0)] + [(p, p) for p in pad]
    return xp.pad(x, widths, mode="constant", constant_values=value)


def im2col_view(x: Any, geom: ConvGeometry, pad_value: float = 0.0) -> Any:
    """A read-only ``(N, C, *ksize, *out)`` view of the padded ``x`` (one copy: the padding).

    Args:
        x: ``(N, C, *spatial)`` input.
        geom: kernel, stride, padding and dilation per spatial axis.
        pad_value: what the padding holds (``-inf`` for max pooling).
    """
    xp = get_array_module(x)
    out = geom.out_size(x.shape[2:])
    if min(out) < 1:
        raise ValueError(
            f"kernel {geom.ksize} with dilation {geom.dilation} does not fit the input "
            f"{tuple(x.shape[2:])} padded by {geom.pad}"
        )
    xpad = xp.ascontiguousarray(pad_spatial(x, geom.pad, pad_value))
    n, c = xpad.shape[:2]
    s_n, s_c, *s_sp = xpad.strides
    shape = (n, c, *geom.ksize, *out)
    strides = (
        s_n,
        s_c,
        *(s * d for s, d in zip(s_sp, geom.dilation)),
        *(s * st for s, st in zip(s_sp, geom.stride)),
    )
    return _as_strided(xp, xpad, shape, strides)


def im2col(x: Any, geom: ConvGeometry, pad_value: float = 0.0) -> Any:
    """A contiguous ``(N, C, *ksize, *out)`` copy of :func:`im2col_view`."""
    xp = get_array_module(x)
    return xp.ascontiguousarray(im2col_view(x, geom, pad_value))


def col2im(col: Any, img_shape: tuple[int, ...], geom: ConvGeometry) -> Any:
    """Add columns ``(N, C, *ksize, *out)`` back into an image of ``img_shape`` ``(N, C, *sp)``.

    Every input pixel receives the sum of the column entries that were copied from it: the
    adjoint of :func:`im2col`, which is what the input gradient of a convolution needs.
    """
    xp = get_array_module(col)
    nd = geom.nd
    out = col.shape[2 + nd :]
    padded = tuple(n + 2 * p for n, p in zip(img_shape[2:], geom.pad))
    img = xp.zeros(tuple(img_shape[:2]) + padded, dtype=col.dtype)
    for offset in itertools.product(*(range(k) for k in geom.ksize)):
        window = tuple(
            slice(o * d, o * d + s * (n - 1) + 1, s)
            for o, d, s, n in zip(offset, geom.dilation, geom.stride, out)
        )
        img[(slice(None), slice(None)) + window] += col[(slice(None), slice(None)) + offset]
    if not any(geom.pad):
        return img
    crop = tuple(slice(p, p + n) for p, n in zip(geom.pad, img_shape[2:]))
    return img[(slice(None), slice(None)) + crop]
