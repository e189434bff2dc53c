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
from collections.abc import Sequence
from typing import Any

from distconv.backend import get_array_module
from distconv.kernels.shape import ConvGeometry, volume


def pad_spatial(x: Any, pad: tuple[int, ...], value: float = 0.0) -> Any:
    """``x`` with ``pad[i]`` entries of ``value`` on both sides of spatial axis ``i``."""
    if not any(pad):
        return x
    xp = get_array_module(x)
    widths = [(0, 0), (0, 0)] + [(p, p) for p in pad]
    return xp.pad(x, widths, mode="constant", constant_values=value)


def _as_strided(xp: Any, a: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)


def can_widen(geom: ConvGeometry) -> bool:
    """Whether the wide column layout applies: stride 1 along the last axis."""
    return geom.stride[-1] == 1


def wide_width(in_size: tuple[int, ...], geom: ConvGeometry) -> int:
    """Length of the last axis in the wide layout: the padded input's last axis."""
    return in_size[-1] + 2 * geom.pad[-1]


class PaddedPlanes:
    """Each sample-channel plane of the padded input, flattened, with a tail of slack.

    The wide layout reads (and col2im writes) each output row over the whole padded width,
    so the last kernel offset runs ``(k-1)*d`` elements past its plane; the tail keeps those
    accesses inside the plane, so the views below never overlap another plane.
    """

    def __init__(self, n: int, c: int, in_size: tuple[int, ...], geom: ConvGeometry, wide: bool):
        self.padded = tuple(s + 2 * p for s, p in zip(in_size, geom.pad))
        self.size = 1
        for s in self.padded:
            self.size *= s
        self.tail = (geom.ksize[-1] - 1) * geom.dilation[-1] if wide else 0
        # row-major element strides of a padded plane
        self.steps = tuple(int(volume(self.padded[i + 1 :])) for i in range(len(self.padded)))
        self.n, self.c, self.geom, self.wide = n, c, geom, wide

    def buffer(self, xp: Any, dtype: Any, fill: float = 0.0) -> Any:
        return xp.full((self.n, self.c, self.size + self.tail), fill, dtype=dtype)

    def holding(self, x: Any, fill: float = 0.0) -> Any:
        """A new buffer with ``x`` ``(N, C, *in)`` inside its padding of ``fill`` (one copy)."""
        buf = self.buffer(get_array_module(x), x.dtype, fill)
        self.interior(buf)[...] = x
        return buf

    def interior(self, buf: Any) -> Any:
        """The unpadded image inside ``buf``, as an ``(N, C, *in)`` view."""
        img = buf[:, :, : self.size].reshape(self.n, self.c, *self.padded)
        window = tuple(slice(p, s - p) for p, s in zip(self.geom.pad, self.padded))
        return img[(slice(None), slice(None)) + window]

    def out_shape(self) -> tuple[int, ...]:
        """Spatial shape of one column slab: ``out``, or ``(*out[:-1], padded_last)`` wide."""
        in_size = tuple(p - 2 * q for p, q in zip(self.padded, self.geom.pad))
        out = self.geom.out_size(in_size)
        return out[:-1] + (self.padded[-1],) if self.wide else out

    def out_strides(self, item: int) -> tuple[int, ...]:
        return tuple(st * s * item for st, s in zip(self.steps, self.geom.stride))


def im2col_view(x: Any, geom: ConvGeometry, pad_value: float = 0.0, wide: bool = False) -> Any:
    """A read-only ``(N, C, *ksize, *out)`` view of the padded ``x`` (one copy: the padding).

    With ``wide=True`` (stride 1 along the last axis) the last output axis runs over the whole
    padded width instead of the ``out[-1]`` valid positions: the view is
    ``(N, C, *ksize, *out[:-1], padded_last)`` and its last two axes are contiguous in memory,
    so copying it into a matrix moves long runs instead of ``out[-1]``-element rows. That pays
    where the copy outweighs the longer product (ConvOperator's per-sample products); where it
    does not, callers take exact columns (``conv_columns.WIDE_MAX_EXTRA``, measured in the
    constants table of docs/benchmarks.md). The extra columns hold junk; callers drop them
    from results and give them zero gradients.

    Args:
        x: ``(N, C, *spatial)`` input.
        geom: kernel, stride, padding and dilation per spatial axis.
        pad_value: what the padding holds (``-inf`` for max pooling).
        wide: use the wide layout (needs ``can_widen(geom)``).
    """
    xp = get_array_module(x)
    out = geom.out_size(x.shape[2:])
    if min(out) < 1:
        raise ValueError(
            f"kernel {geom.ksize} with dilation {geom.dilation} does not fit the input "
            f"{tuple(x.shape[2:])} padded by {geom.pad}"
        )
    planes = PaddedPlanes(x.shape[0], x.shape[1], tuple(x.shape[2:]), geom, wide)
    buf = planes.holding(x, pad_value)
    item = buf.itemsize
    shape = (planes.n, planes.c, *geom.ksize, *planes.out_shape())
    strides = (
        *buf.strides[:2],
        *(st * d * item for st, d in zip(planes.steps, geom.dilation)),
        *planes.out_strides(item),
    )
    return _as_strided(xp, buf, shape, strides)


def im2col(x: Any, geom: ConvGeometry, pad_value: float = 0.0) -> Any:
    """A contiguous ``(N, C, *ksize, *out)`` copy of :func:`im2col_view`."""
    xp = get_array_module(x)
    return xp.ascontiguousarray(im2col_view(x, geom, pad_value))


def col2im(col: Any, img_shape: tuple[int, ...], geom: ConvGeometry) -> Any:
    """Add columns ``(N, C, *ksize, *out)`` back into an image of ``img_shape`` ``(N, C, *sp)``.

    Every input pixel receives the sum of the column entries that were copied from it: the
    adjoint of :func:`im2col`. One vectorised add per kernel offset. This is the plain form
    (pooling uses it); convolutions use the faster :func:`col2im_wide`.
    """
    xp = get_array_module(col)
    out = col.shape[2 + geom.nd :]
    padded = tuple(n + 2 * p for n, p in zip(img_shape[2:], geom.pad))
    img = xp.zeros(tuple(img_shape[:2]) + padded, dtype=col.dtype)
    for offset in itertools.product(*(range(k) for k in geom.ksize)):
        window = tuple(
            slice(o * d, o * d + s * (n - 1) + 1, s)
            for o, d, s, n in zip(offset, geom.dilation, geom.stride, out)
        )
        img[(slice(None), slice(None)) + window] += col[(slice(None), slice(None)) + offset]
    return _crop(img, geom.pad, img_shape[2:])


def _crop(img: Any, pad: tuple[int, ...], size: Sequence[int]) -> Any:
    if not any(pad):
        return img
    return img[(slice(None), slice(None)) + tuple(slice(p, p + n) for p, n in zip(pad, size))]


def phase_grid(img_size: Sequence[int], geom: ConvGeometry) -> tuple[int, ...]:
    """Size of each stride phase of the padded image: ``ceil(padded / stride)`` per axis."""
    return tuple(-(-(n + 2 * p) // s) for n, p, s in zip(img_size, geom.pad, geom.stride))


def wide_col_size(out: Sequence[int], img_size: Sequence[int], geom: ConvGeometry) -> tuple:
    """Spatial size of :func:`col2im_wide`'s columns: ``out[0]``, then the phase grid."""
    return (int(out[0]),) + phase_grid(img_size, geom)[1:]


def col2im_wide(col: Any, img_shape: tuple[int, ...], geom: ConvGeometry) -> Any:
    """:func:`col2im` for columns in the wide layout ``(N, C, *ksize, *wide_col_size)``.

    Kernel offsets fall into stride phases (offset ``k*d`` lands on pixels ``≡ k*d mod s``);
    within a phase every offset is a plain shift. Each phase accumulates in its own flat
    buffer, where the offset's whole slab is one contiguous run once the columns are widened
    to the phase grid on every axis but the first (the extra columns must be zero, so what
    they add where they land is nothing). The phases are then interleaved into the image once.
    A plain col2im adds through strided windows with rows as short as ``out[-1]``, which numpy
    runs element-run by element-run; this form moves long contiguous runs instead (faster on
    strided 3-D layers and small outputs; see docs/benchmarks-history.md).
    """
    xp = get_array_module(col)
    n, c = img_shape[:2]
    grid = phase_grid(img_shape[2:], geom)
    steps = tuple(volume(grid[a + 1 :]) for a in range(geom.nd))
    run = col.shape[2 + geom.nd] * steps[0]
    slabs = col.reshape(n, c, *geom.ksize, -1)
    padded = tuple(m + 2 * p for m, p in zip(img_shape[2:], geom.pad))
    img = xp.zeros((n, c, *padded), dtype=col.dtype)
    for phase, taps in _taps_by_phase(geom, steps).items():
        buf = xp.zeros((n, c, max(volume(grid), max(s for _, s in taps) + run)), dtype=col.dtype)
        for offset, start in taps:
            buf[:, :, start : start + run] += slabs[(slice(None), slice(None)) + offset]
        target = img[
            (slice(None), slice(None))
            + tuple(slice(r, None, s) for r, s in zip(phase, geom.stride))
        ]
        dense = buf[:, :, : volume(grid)].reshape(n, c, *grid)
        target[...] = dense[
            (slice(None), slice(None)) + tuple(slice(0, m) for m in target.shape[2:])
        ]
    return _crop(img, geom.pad, img_shape[2:])


def _taps_by_phase(geom: ConvGeometry, steps: tuple[int, ...]) -> dict:
    """Kernel offsets grouped by stride phase, each with its flat start in the phase grid."""
    taps: dict[tuple[int, ...], list] = {}
    for offset in itertools.product(*(range(k) for k in geom.ksize)):
        reach = [o * d for o, d in zip(offset, geom.dilation)]
        phase = tuple(r % s for r, s in zip(reach, geom.stride))
        start = sum((r // s) * st for r, s, st in zip(reach, geom.stride, steps))
        taps.setdefault(phase, []).append((offset, start))
    return taps


def widen_output(g: Any, size: tuple[int, ...]) -> Any:
    """``g`` ``(B, O, *out)`` zero-padded at the end of its spatial axes to ``size``.

    Output-side arrays in a wide column layout, where the extra columns must contribute
    nothing.
    """
    if tuple(g.shape[2:]) == tuple(size):
        return g
    xp = get_array_module(g)
    wide = xp.zeros((*g.shape[:2], *size), dtype=g.dtype)
    wide[(slice(None), slice(None)) + tuple(slice(0, m) for m in g.shape[2:])] = g
    return wide


def widen_output_channels_last(g: Any, size: tuple[int, ...], groups: int) -> Any:
    """:func:`widen_output` of ``g`` ``(B, O, *out)`` as contiguous ``(B, G, prod(size), O/G)``.

    The right-hand operand of ``columns @ g^T`` (a weight gradient), where BLAS runs faster
    from a contiguous operand than from a transposed view (see
    :data:`~distconv.kernels.conv_per_sample.CONTIGUOUS_X_MIN_CHANNELS`); the transposing
    copy and the widening are one pass here.
    """
    xp = get_array_module(g)
    b, o = g.shape[:2]
    sp = tuple(g.shape[2:])
    fill = xp.empty if sp == tuple(size) else xp.zeros
    t = fill((b, groups, *size, o // groups), dtype=g.dtype)
    src = g.reshape(b, groups, o // groups, *sp)
    src = src.transpose(0, 1, *range(3, 3 + len(sp)), 2)  # (B, G, *out, O/G)
    t[(slice(None), slice(None)) + tuple(slice(0, m) for m in sp)] = src
    return t.reshape(b, groups, volume(size), o // groups)
