"""A 2-D convolution at stride 1 as one matrix product per kernel tap: no columns at all.

im2col copies every input pixel once per kernel tap into a column matrix, and for a large
image that copy costs about as much as the product it feeds (N32 C64 56x56: 60 M elements per
pass). In the wide layout (:func:`~distconv.kernels.im2col.im2col_view`) the columns of tap
``(i, j)`` are a plain window of the flattened padded image, ``planes[n, :, off:off + L]`` with
``off = i*d*Wp + j*d`` and ``L = out_h * Wp``, whose rows lie a plane apart. BLAS reads such a
window in place, so each pass is nine (``kh*kw``) products summed by ``beta = 1``
(:func:`distconv.kernels.blas.gemm`):

=============  ==============================================================
forward        ``y_wide[n] += W[tap] @ window(x_n, tap)``
input grad     ``window(dx_n, tap) += W[tap]^T @ dy_wide[n]`` (a col2im without columns)
weight grad    ``dW[tap] += dy_wide[n] @ window(x_n, tap)^T``
=============  ==============================================================

``dy_wide`` is the output gradient widened with zeros to ``Wp`` columns, so the junk columns
of the wide layout add nothing. One product per sample and tap: a Python loop over samples,
of calls that each run a ``(O, C, out_h * Wp)`` product, which is what makes the path pay on
large images only (the cost model keeps small images in the batched im2col layout).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from distconv.backend import is_gpu_array
from distconv.kernels import blas
from distconv.kernels.im2col import PaddedPlanes, wide_width, widen_output
from distconv.kernels.shape import ConvGeometry

#: a tap's product has ``C/G`` (forward) or ``O/G`` (input gradient) as its inner dimension;
#: below this BLAS runs far from its peak and im2col's single long product wins
SHIFTED_MIN_CHANNELS = 16
#: the weight gradient's products are ``(O/G, C/G)`` blocks; with 16 channels a group they ran
#: slower than im2col, with 64 both ways faster (docs/benchmarks.md, the constants)
SHIFTED_WEIGHT_GRAD_MIN_BLOCK = 32 * 32


def shifted_applies(x: Any, w: Any, geom: ConvGeometry) -> bool:
    """Whether a convolution of ``x`` by ``w`` (conv layout ``(O, C/G, kh, kw)``) may go by
    shifted products: 2-D, stride 1, on the CPU in float32/64, with enough channels a group."""
    o, cg = w.shape[:2]
    return (
        geom.nd == 2
        and all(s == 1 for s in geom.stride)
        and not is_gpu_array(x)
        and x.dtype == w.dtype
        and min(cg, o // geom.groups) >= SHIFTED_MIN_CHANNELS
        and blas.available(x.dtype)
    )


def shifted_weight_grad_pays(x: Any, dy: Any, w: Any, geom: ConvGeometry) -> bool:
    """Whether the weight gradient, given :func:`shifted_applies`, goes by taps too: same
    dtypes (BLAS multiplies one type) and weight blocks large enough to beat im2col."""
    o, cg = w.shape[:2]
    return dy.dtype == x.dtype and (o // geom.groups) * cg >= SHIFTED_WEIGHT_GRAD_MIN_BLOCK


class Taps:
    """Per-tap weights and window offsets of one convolution, shared by its chunks."""

    def __init__(self, w: Any, geom: ConvGeometry, in_size: tuple[int, ...]) -> None:
        o, cg = w.shape[:2]
        self.groups, self.og, self.cg = geom.groups, o // geom.groups, cg
        self.geom, self.in_size, self._weight = geom, in_size, w
        wp = wide_width(in_size, geom)
        self.out_h = geom.out_size(in_size)[0]  # stride 1 (shifted_applies)
        self.width = wp
        self.length = self.out_h * wp
        self.offsets = [
            i * geom.dilation[0] * wp + j * geom.dilation[1]
            for i, j in itertools.product(*map(range, geom.ksize))
        ]

    @functools.cached_property
    def w(self) -> Any:
        """``(G, taps, O/G, C/G)``: each tap's weight matrix contiguous. Made on first use: a
        convolution builds its ``Taps`` before the cost model picks a layout, and the batched
        layout never reads them."""
        w, geom = self._weight, self.geom
        w = w.reshape(self.groups, self.og, self.cg, geom.kernel_volume).transpose(0, 3, 1, 2)
        return np.ascontiguousarray(w)

    def planes_of(self, n: int, c: int) -> PaddedPlanes:
        """The padded planes of ``n`` images of ``c`` channels, wide layout's tail included."""
        return PaddedPlanes(n, c, self.in_size, self.geom, wide=True)

    def windows(self, buf: Any, n: int, g: int) -> Iterator[tuple[int, Any]]:
        """``(tap, window)`` pairs of sample ``n``'s group ``g`` in a planes buffer."""
        rows = buf[n, g * self.cg : (g + 1) * self.cg]
        return enumerate(rows[:, off : off + self.length] for off in self.offsets)


def _padded(x: Any, taps: Taps) -> Any:
    """The padded, flattened planes of ``x`` (one copy), with the wide layout's tail."""
    return taps.planes_of(x.shape[0], x.shape[1]).holding(x)


def _wide(dy: Any, taps: Taps) -> Any:
    """``dy`` ``(B, O, h, w)`` zero-padded to ``(out_h, Wp)``, as ``(B, O, L)``: the junk
    columns of the wide layout (and a transposed convolution's missing last row) add nothing.
    Copied where BLAS could not read it in place (already that shape, ``dy`` is the caller's
    view: channels reversed, broadcast)."""
    gy = widen_output(dy, (taps.out_h, taps.width)).reshape(*dy.shape[:2], -1)
    return gy if not gy.size or blas.readable(gy[0]) else np.ascontiguousarray(gy)


def forward_chunk(x: Any, taps: Taps, y: Any) -> None:
    """``y`` ``(B, O, out_h, out_w)`` = the convolution of the chunk ``x`` ``(B, C, H, W)``."""
    buf = _padded(x, taps)
    acc = np.empty((taps.og, taps.length), dtype=x.dtype)
    for n in range(x.shape[0]):
        for g in range(taps.groups):
            for t, window in taps.windows(buf, n, g):
                blas.gemm(taps.w[g, t], window, acc, 0.0 if t == 0 else 1.0)
            out = acc.reshape(taps.og, taps.out_h, taps.width)[..., : y.shape[-1]]
            y[n, g * taps.og : (g + 1) * taps.og] = out


def weight_grad_chunk(x: Any, dy: Any, taps: Taps) -> Any:
    """This chunk's ``dW`` summed over its samples in order, as im2col's partials are laid
    out: ``(G, O/G, C/G * taps)``."""
    buf = _padded(x, taps)
    gy = _wide(dy, taps)
    dw = np.zeros_like(taps.w)
    for n in range(x.shape[0]):
        for g in range(taps.groups):
            src = gy[n, g * taps.og : (g + 1) * taps.og]
            for t, window in taps.windows(buf, n, g):
                blas.gemm(src, window.T, dw[g, t], 1.0)
    return dw.transpose(0, 2, 3, 1).reshape(taps.groups, taps.og, -1)


def data_grad_chunk(dy: Any, taps: Taps, dx: Any) -> None:
    """``dx`` ``(B, C, H, W)`` = the input gradient of the chunk, from its ``dy``."""
    planes = taps.planes_of(dx.shape[0], dx.shape[1])
    buf = planes.buffer(np, dy.dtype)
    gy = _wide(dy, taps)
    for n in range(dy.shape[0]):
        for g in range(taps.groups):
            src = gy[n, g * taps.og : (g + 1) * taps.og]
            for t, window in taps.windows(buf, n, g):
                blas.gemm(taps.w[g, t].T, src, window, 1.0)
    dx[...] = planes.interior(buf)
