"""The column matrices a CPU convolution multiplies, their layouts, and the forward's cache.

im2col (:mod:`distconv.kernels.im2col`) gives a strided view; the functions here copy a chunk
of samples out of it as the matrices :mod:`distconv.kernels.conv` multiplies: one per sample,
or batched (the chunk's samples side by side in one product), in the exact or the wide layout
(:func:`column_layout`). :class:`Columns` keeps a forward's matrices for its weight gradient.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from distconv.backend import get_array_module, is_gpu_array
from distconv.kernels.im2col import can_widen, col2im, im2col_view, wide_width
from distconv.kernels.shape import ConvGeometry


def in_common_dtype(*arrays: Any) -> tuple[Any, ...]:
    """``arrays`` in ``result_type`` of their dtypes: what a convolution computes in.

    A fully connected layer's product is in ``result_type(x, w)`` (float64 weights under a float32
    input: float64; a 16-bit input under float32 weights: float32), so a convolution is too,
    instead of in the input's dtype, which rounded float64 weights to float32 products. Arrays
    already in it are returned themselves, not copied: the float32 path costs nothing.
    """
    dtype = np.result_type(*(a.dtype for a in arrays))
    return tuple(a.astype(dtype, copy=False) for a in arrays)


def grouped_columns(x: Any, geom: ConvGeometry, a: int, b: int, wide: bool, batched: bool) -> Any:
    """Samples ``a:b`` of ``x`` as grouped column matrices (one copy).

    Per sample: ``(B, G, C/G*K, L)``, one matrix per sample, exact or ``wide``. Batched:
    ``(G, C/G*K, L*B)``, the chunk's samples innermost (:func:`batch_inner_geometry`), so
    one matrix product covers the chunk; always exact columns.
    """
    G = geom.groups
    if batched:
        view = im2col_view(_batch_last(x[a:b]), batch_inner_geometry(geom))
    else:
        view = im2col_view(x[a:b], geom, wide=wide)
    rows = (view.shape[1] // G) * geom.kernel_volume
    return view.reshape(G, rows, -1) if batched else view.reshape(b - a, G, rows, -1)


def batch_inner_geometry(geom: ConvGeometry) -> ConvGeometry:
    """``geom`` with the batch as one more, innermost, spatial axis that the kernel does not
    reach across (size 1, stride 1, no padding).

    The batched layout is im2col of the chunk viewed as one image ``(1, C, *sp, B)``: each
    pixel's samples lie side by side, so the copy into columns moves runs of ``out[-1] * B``
    elements. With the batch outermost (``(C, *k, B, *out)``) the runs were ``out[-1]``
    elements, 4 on LeNet's conv2 at the digits' 4x4, and the copy cost more than the product
    (docs/benchmarks-history.md). cuda-convnet lays images out the same way, for the same reason.
    """
    return ConvGeometry(
        (*geom.ksize, 1), (*geom.stride, 1), (*geom.pad, 0), (*geom.dilation, 1), geom.groups
    )


#: a copy that puts the batch last reads one element from each sample's row in turn; where
#: those rows lie a multiple of this many bytes apart they share a few sets of the L1 cache
#: and evict each other (4K aliasing), and numpy's copy ran 2-6x slower than at other strides
#: (64 rows of 4 KiB: 84-87 us against 13-14 us at 4000 or 4160 bytes). Such rows are staged
#: through a copy whose rows are :data:`STAGE_PAD` elements longer: 17 us (docs/benchmarks.md)
ALIASED_STRIDE = 2048
STAGE_PAD = 16
#: staged only above this many rows: LeNet's conv2 at the digits' 4x4 and batch 16 ran no
#: faster staged (the extra copy eats the gain), at 32 0.94-0.99x, at 64 0.85x the time ...
ALIASED_MIN_ROWS = 16
#: ... and rows of at most this many bytes: staging gained from 2 to 16 KiB, and the columns
#: of a 32-channel 28x28 batch (rows of 98 KiB) were built 10-20 % slower staged
ALIASED_MAX_ROW_BYTES = 16 << 10


def _batch_last(x: Any) -> Any:
    """``(B, C, *sp)`` -> ``(1, C, *sp, B)``: a view, or a contiguous copy where the samples'
    rows alias in the cache (:data:`ALIASED_STRIDE`) and a copy made here pays."""
    if _rows_alias(x):
        b, m = x.shape[0], x[0].size
        staged = get_array_module(x).empty((b, m + STAGE_PAD), dtype=x.dtype)[:, :m]
        staged[...] = x.reshape(b, m)  # row by row: no aliasing in a plain copy
        return staged.T.copy().reshape(1, *x.shape[1:], b)
    return x.transpose(*range(1, x.ndim), 0)[None]  # not moveaxis: its checks cost more here


def _rows_alias(x: Any) -> bool:
    """Whether putting the batch of CPU array ``x`` last reads its samples' rows 4K-aliased."""
    stride = x.strides[0]
    return (
        x.shape[0] > ALIASED_MIN_ROWS
        and 0 < stride <= ALIASED_MAX_ROW_BYTES
        and stride % ALIASED_STRIDE == 0
        and not is_gpu_array(x)
    )


def batch_inner(g: Any, groups: int) -> Any:
    """``(B, O, *sp)`` -> ``(G, O/G, L*B)``: output-side rows in the batched column order."""
    return _batch_last(g)[0].reshape(groups, g.shape[1] // groups, -1)


def from_batch_inner(t: Any, b: int, spatial: tuple[int, ...]) -> Any:
    """``(G, O/G, L*B)`` -> a ``(B, O, *spatial)`` view (the inverse of :func:`batch_inner`)."""
    t = t.reshape(-1, *spatial, b)
    return t.transpose(t.ndim - 1, *range(t.ndim - 1))


def col2im_batched(
    col: Any, out: tuple[int, ...], x_shape: tuple[int, ...], geom: ConvGeometry
) -> Any:
    """Add batched columns ``(G, C/G*K, L*B)`` back into images: a ``(B, C, *sp)`` view.

    The adjoint of :func:`grouped_columns`' batched layout: :func:`~distconv.kernels.im2col.
    col2im` of the chunk as one image with the batch innermost, whose adds then move runs of
    ``out[-1] * B`` elements too.
    """
    b, c = x_shape[:2]
    col = col.reshape(1, c, *geom.ksize, 1, *out, b)
    img = col2im(col, (1, c, *x_shape[2:], b), batch_inner_geometry(geom))
    img = img[0]
    return img.transpose(img.ndim - 1, *range(img.ndim - 1))


def column_layout(
    in_size: tuple[int, ...], geom: ConvGeometry, w_shape: tuple[int, ...] | None = None
) -> tuple[bool, tuple[int, ...]]:
    """Whether per-sample columns of an ``in_size`` image use the wide layout, and their
    spatial size. (Batched columns are always exact: their runs are long anyway.)

    Wide columns run over the whole padded width (``can_widen``), so their copy moves long
    contiguous runs, but output-side arrays must be widened to match (:func:`widen_output`)
    and cropped after: a pass over the output. Given the weight's shape, the wide layout is
    kept only where the columns outweigh the output (``C/G * K >= O/G`` rows per position);
    few input channels fanning out to many (a first layer on grey images: 9 rows, 32
    outputs) take exact columns, and the product writes straight into the output. So do small
    2-D images: widening 4 pixels to 6 or 14 to 16 makes every product that much longer
    (:data:`WIDE_MAX_EXTRA`; measured in 2-D only, and a 3-D probe at 8x8x8 went the other
    way). Without a weight shape (a filter bank per sample, whose products are small and
    whose copy dominates) the wide layout stays wherever it applies.
    """
    out = geom.out_size(in_size)
    wide = can_widen(geom) and (
        w_shape is None
        or (
            _columns_outweigh_output(w_shape, geom)
            and (geom.nd != 2 or wide_width(in_size, geom) <= (1 + WIDE_MAX_EXTRA) * out[-1])
        )
    )
    return wide, (*out[:-1], wide_width(in_size, geom) if wide else out[-1])


#: the most the wide layout may lengthen each output row (and so each product) relative to
#: the exact one: LeNet's conv2 ran faster with exact columns at 4x4 and 14x14, a half and a
#: seventh longer when wide (docs/benchmarks.md; measured per sample and batched batch-major,
#: before batched columns put the batch innermost: it now decides per-sample shapes only)
WIDE_MAX_EXTRA = 0.1


def _columns_outweigh_output(w_shape: tuple[int, ...], geom: ConvGeometry) -> bool:
    o, cg = w_shape[:2]
    return cg * geom.kernel_volume >= o // geom.groups


class Columns:
    """The column matrices a forward built, kept for the weight gradient of its backward.

    The weight gradient multiplies by the same columns of ``x`` the forward did; keeping them
    saves building them again (on LeNet's conv2 at 28x28, a quarter of the weight gradient's
    time). Keyed by chunk and batched-or-not, so a backward whose chunks differ (the autotuner
    chose another layout) rebuilds what it does not find; the wide-or-exact choice follows from
    the shapes, which is why one ``Columns`` serves one forward and its backward only. Holds
    at most ``max_bytes``: columns beyond it are rebuilt in backward, as without a cache.
    """

    def __init__(self, max_bytes: int = 32 << 20) -> None:
        self.max_bytes, self.nbytes = max_bytes, 0
        self._kept: dict[tuple[int, int, bool], Any] = {}
        self._lock = threading.Lock()  # chunks run on the kernel threads

    def keep(self, key: tuple[int, int, bool], col: Any) -> None:
        with self._lock:
            old = self._kept.pop(key, None)  # the autotuner builds a chunk's columns twice
            self.nbytes -= 0 if old is None else old.nbytes
            if self.nbytes + col.nbytes <= self.max_bytes:
                self._kept[key] = col
                self.nbytes += col.nbytes

    def get(self, key: tuple[int, int, bool]) -> Any:
        return self._kept.get(key)
