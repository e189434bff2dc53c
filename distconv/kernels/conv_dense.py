"""The input gradient of a convolution on tiny images as one dense matrix product.

On a 4x4 image a 3x3 kernel touches most of the input from every output pixel, so the
convolution is nearly a dense ``(O*out, C*in)`` matrix ``M``, and ``dx = dy @ M`` needs no
column copies and no col2im. When it pays is :func:`distconv.kernels.conv_layout.dense_pays`.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from distconv.backend import get_array_module
from distconv.kernels.parallel import matmul
from distconv.kernels.shape import ConvGeometry, volume


@functools.lru_cache(maxsize=64)
def dense_taps(geom: ConvGeometry, out: tuple[int, ...], in_size: tuple[int, ...]) -> tuple:
    """``(k, p, q)``: flat kernel offset, output pixel and input pixel of every tap in bounds."""
    ks, ps, qs = [], [], []
    for k, offset in enumerate(itertools.product(*(range(n) for n in geom.ksize))):
        grids = np.meshgrid(*(np.arange(m) for m in out), indexing="ij")
        q_axes = [
            grid * s - p + o * d
            for grid, s, p, o, d in zip(grids, geom.stride, geom.pad, offset, geom.dilation)
        ]
        inside = np.logical_and.reduce([(q >= 0) & (q < n) for q, n in zip(q_axes, in_size)])
        q_flat = np.ravel_multi_index(tuple(q[inside] for q in q_axes), in_size)
        ps.append(np.flatnonzero(inside))
        qs.append(q_flat)
        ks.append(np.full(len(q_flat), k))
    return np.concatenate(ks), np.concatenate(ps), np.concatenate(qs)


def conv_backward_data_dense(g: Any, w: Any, geom: ConvGeometry, x_shape: tuple[int, ...]) -> Any:
    """``dx = g @ M`` with the convolution written out as a dense ``(O*out, C*in)`` matrix."""
    xp = get_array_module(g, w)
    o, c = w.shape[:2]
    n = g.shape[0]
    out, in_size = tuple(g.shape[2:]), tuple(x_shape[2:])
    k, p, q = dense_taps(geom, out, in_size)
    # pixel-major (P, O, Q, C): each tap writes O runs of C contiguous weights
    m = xp.zeros((volume(out), o, volume(in_size), c), dtype=w.dtype)
    # advanced indices apart put their axis first: m[p, :, q, :] is (taps, O, C)
    m[p, :, q, :] = w.reshape(o, c, -1).transpose(2, 0, 1)[k]
    gt = g.reshape(n, o, -1).swapaxes(1, 2).reshape(n, -1)
    dx = matmul(gt, m.reshape(volume(out) * o, -1))  # on the kernel threads
    # in g's type, as the other routes give it: a bfloat16 product is float32 (so was a
    # transposed convolution's output from 128 samples on), a float32 g by float64 w float64
    result = xp.empty(tuple(x_shape), dtype=g.dtype)
    result.reshape(n, c, -1)[...] = dx.reshape(n, -1, c).swapaxes(1, 2)
    return result
