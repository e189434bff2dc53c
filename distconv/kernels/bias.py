"""A shared bias's gradient: the output gradient summed per channel, over the batch and the
positions.

numpy reduces ``g.sum(axis=(0, 2, 3))`` element by element across strided axes; summing the
batch first (whole rows at a time, contiguous adds) and then each channel's positions took
0.10-0.51x the time on LeNet's shapes (docs/benchmarks-history.md, "A shared bias's
gradient"). The order is fixed by the shapes alone, so results stay bitwise the same for any
thread count.
"""

from __future__ import annotations

from typing import Any

from distconv.backend import get_array_module


def channel_sums(g: Any, channels: int) -> Any:
    """``g`` ``(N, ...)``, whose axes after the batch hold ``channels`` channels of equal size
    one after another (``(N, C, *sp)``, or ``(N, C * L)``), summed per channel: ``(channels,)``.

    16-bit gradients (float16, ``ml_dtypes``' bfloat16) are summed in float32 and handed back in
    their own dtype.
    """
    xp = get_array_module(g)
    dtype = g.dtype
    narrow = dtype.itemsize < 4 and (dtype.kind == "f" or dtype.type.__module__ == "ml_dtypes")
    wide = xp.float32 if narrow else None
    if g.shape[0] == 1:  # one sample: nothing to add across the batch (a sum would copy it)
        rows = g[0] if wide is None else g[0].astype(wide)
    else:
        rows = g.sum(axis=0, dtype=wide)  # the batch: one contiguous add a sample
    return rows.reshape(channels, -1).sum(axis=1).astype(dtype, copy=False)
