"""A bias's gradient: the output gradient summed over the batch (:func:`row_sums`), and for a
shared bias per channel over the positions too (:func:`channel_sums`).

Both sum 16-bit gradients (float16, ``ml_dtypes``' bfloat16) in float32: numpy adds them in
their own type, so past a few hundred rows a bfloat16 sum stops growing.

numpy reduces ``g.sum(axis=(0, 2, 3))`` element by element across strided axes; summing the
batch first (whole rows at a time, contiguous adds) and then each channel's positions took
0.10-0.51x the time on LeNet's shapes (docs/benchmarks-history.md, "A shared bias's
gradient"). The order is fixed by the shapes alone, so results stay bitwise the same for any
thread count.
"""

from __future__ import annotations

from typing import Any

from distconv.backend import get_array_module, sum_dtype, widened


def channel_sums(g: Any, channels: int) -> Any:
    """``g`` ``(N, ...)``, whose axes after the batch hold ``channels`` channels of equal size
    one after another (``(N, C, *sp)``, or ``(N, C * L)``), summed per channel: ``(channels,)``.

    16-bit gradients (float16, ``ml_dtypes``' bfloat16) are summed in float32 and handed back in
    their own dtype.
    """
    dtype = g.dtype
    wide = sum_dtype(dtype)
    if g.shape[0] == 1:  # one sample: nothing to add across the batch (a sum would copy it)
        rows = widened(g[0])
    else:
        rows = g.sum(axis=0, dtype=wide)  # the batch: one contiguous add a sample
    return rows.reshape(channels, -1).sum(axis=1).astype(dtype, copy=False)


def row_sums(g: Any) -> Any:
    """``g.sum(axis=0)``: a gradient summed over the batch (a bias's, or a per-column weight's),
    16-bit gradients in float32 and handed back in their own dtype."""
    wide = sum_dtype(g.dtype)
    return g.sum(axis=0) if wide is None else g.sum(axis=0, dtype=wide).astype(g.dtype)


def add_bias(y: Any, bias: Any) -> Any:
    """``y + bias`` (``bias`` broadcast), in ``result_type(y, bias)``: in place where ``y``
    already holds that dtype, as it does when the bias and weights share theirs.

    A layer's product is in ``result_type(input, weight)``; a bias added into it in place was
    rounded to that dtype (a float64 bias beside a float32 weight shared from another layer came
    out float32), where a Mixed layer takes every parameter into its output's dtype.
    """
    if get_array_module(y).result_type(y, bias) != y.dtype:
        return y + bias
    y += bias
    return y
