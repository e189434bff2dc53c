"""The input gradient of a strided depthwise convolution by shifted slices: no columns at all.

With ``groups == C`` each output channel reads one input channel, so col2im's products are
``(K, m) @ (m, L)`` per group and sample, ``m`` the channel multiplier (``O = C * m``) and
``K`` the kernel volume: thousands of tiny products, and a col2im after them. At stride 1 the
input gradient is a convolution with the flipped kernel (:func:`~distconv.kernels.conv.
flip_pays`); strided, with one filter a channel (``m == 1``, MobileNet's layers), it is here
instead one multiply-add per kernel tap, vectorised over a chunk's samples, channels and
pixels::

    window(dx_pad, tap) += w[c, 0, tap] * dy[n, c]

``window(a, tap)`` is the padded image sliced at the tap's offset with the stride as step: a
view, for any number of spatial axes. It adds exactly the pairs col2im adds (none past the
image), so an inf anywhere gives what the exact route gives. The same code runs on numpy and
cupy. With a multiplier the products have ``m`` columns to add over and beat ``m`` passes a
tap: stride 2, one thread, the passes took 2.3-4.7x the columns' time at ``m`` 2 and 4 (C16 to
C128, 14x14 to 112x112), so those stay on columns. The forward and the weight gradient stay on
im2col too: on the CPU the same passes, two a tap, ran 1.1-2x slower than its columns there
(docs/benchmarks.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from distconv.backend import get_array_module, is_gpu_array, sum_dtype
from distconv.kernels.parallel import over_batch
from distconv.kernels.shape import ConvGeometry, volume


def depthwise_data_grad_applies(channels: int, filters: int, geom: ConvGeometry) -> bool:
    """Whether the input gradient of a convolution of ``channels`` input channels and
    ``filters`` output channels goes by shifted slices: depthwise (one group a channel, more
    than one) with one filter a channel, and strided."""
    return geom.groups == channels == filters > 1 and any(s > 1 for s in geom.stride)


def _windows(geom: ConvGeometry, out: tuple[int, ...]) -> Iterator[tuple[slice, ...]]:
    """Each tap's window of ``out`` positions in a padded image, in the weight's tap order."""
    for offset in itertools.product(*map(range, geom.ksize)):
        yield tuple(
            slice(o * d, o * d + s * (n - 1) + 1, s)
            for o, d, s, n in zip(offset, geom.dilation, geom.stride, out)
        )


def depthwise_data_grad(g: Any, w: Any, geom: ConvGeometry, x_shape: tuple[int, ...]) -> Any:
    """:func:`~distconv.kernels.conv.conv_backward_data` of a depthwise convolution with one
    filter a channel.

    Args:
        g: ``(N, C, *out)``; ``out`` may be shorter than the convolution's output of
            ``x_shape`` (a transposed convolution's input).
        w: ``(C, 1, *k)``.
        geom: kernel, stride, padding, dilation; ``groups == C``.
        x_shape: ``(N, C, *sp)``.

    Returns:
        ``dx`` of ``x_shape`` in ``g``'s dtype, its sums in float32 for 16-bit types.
    """
    n, c = x_shape[:2]
    out = tuple(g.shape[2:])
    xp = get_array_module(g, w)
    acc = sum_dtype(xp.result_type(g, w)) or xp.result_type(g, w)
    # (C, 1, *k) -> (K, C, 1, ...): tap t's weights over (B, C, *out)
    wt = w.reshape(c, -1).astype(acc, copy=False).T
    wt = wt.reshape(*wt.shape, *(1,) * geom.nd)
    padded = tuple(s + 2 * p for s, p in zip(x_shape[2:], geom.pad))
    inside = (slice(None),) * 2 + tuple(slice(p, p + s) for p, s in zip(geom.pad, x_shape[2:]))

    def run(a: int, b: int) -> None:
        dx_pad = xp.zeros((b - a, c, *padded), dtype=acc)
        term = xp.empty((b - a, c, *out), dtype=acc)
        for tap, window in enumerate(_windows(geom, out)):
            xp.multiply(g[a:b], wt[tap], out=term)
            dx_pad[(slice(None),) * 2 + window] += term
        dx[a:b] = dx_pad[inside]

    dx = xp.empty(tuple(x_shape), dtype=g.dtype)
    over_batch(run, n, c * geom.kernel_volume * volume(out), on_gpu=is_gpu_array(g))
    return dx
