"""Max-pooling windows where comparing with the maximum alone would route a gradient other
than PyTorch does: NaN windows, ``-inf`` tied with padding, and an inf or NaN in ``dy``.

Rare, so :meth:`RareWindows.find` looks for them once per chunk and :mod:`distconv.kernels.pool`
pays for the rest only when one is there.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from distconv.backend import all_finite, get_array_module, is_gpu_array, to_host
from distconv.kernels.finite import DOT_FROM
from distconv.kernels.shape import ConvGeometry


class RareWindows:
    """Windows where ``x == y`` and ``dy * hit`` alone would route a gradient other than
    PyTorch does.

    - A window whose maximum is NaN: PyTorch's gradient goes to its *last* NaN (it keeps
      taking ``isnan(val)``), where ``NaN == NaN`` would route it nowhere.
    - A window whose maximum is ``-inf`` while it overlaps the padding: PyTorch's gradient goes
      to the first element *inside* the image, where the ``-inf`` padding would otherwise win
      the tie and swallow it.
    - An inf or NaN in ``dy``: PyTorch gives it to the window's maximum alone, where
      ``dy * hit`` would make it NaN at every other element (``inf * 0``).

    All are rare, so :meth:`find` looks for them once per chunk: one finiteness check of ``y``
    and of ``dy`` and, on a GPU, one wait for the device; the rest is built only when one is
    there.
    """

    def __init__(
        self,
        windows: Any,
        y: Any,
        geom: ConvGeometry,
        in_size: tuple[int, ...],
        nan: Any,
        pad: bool,
        bad_dy: bool,
    ) -> None:
        xp = self.xp = get_array_module(y)
        self.geom, self.in_size, self.out = geom, in_size, tuple(y.shape[2:])
        self.nan, self.pad, self.bad_dy = nan, pad, bad_dy
        self.last_nan = None
        if nan is not None:  # index of each window's last NaN
            self.last_nan = xp.full(y.shape, -1, dtype=xp.int32)
            for k in range(geom.kernel_volume):
                self.last_nan[xp.isnan(windows[k])] = k

    @classmethod
    def find(
        cls, windows: Any, y: Any, dy: Any, geom: ConvGeometry, in_size: tuple[int, ...]
    ) -> RareWindows | None:
        """The rare windows of a chunk, or None when it has none (the common case)."""
        xp = get_array_module(y)
        if is_gpu_array(y):  # one read of both answers: each read is a wait for the device
            finite = bool(to_host(xp.stack([xp.isfinite(y).all(), xp.isfinite(dy).all()])).all())
        else:
            finite = all_finite(y, DOT_FROM) and all_finite(dy, DOT_FROM)  # the kernels' check
        if finite:
            return None
        nan = xp.isnan(y)
        has_nan = bool(nan.any())
        pad = any(geom.pad) and bool(xp.isneginf(y).any())
        bad_dy = not bool(xp.isfinite(dy).all())
        if not (has_nan or pad or bad_dy):
            return None  # only +inf maxima: x == y routes those right
        return cls(windows, y, geom, in_size, nan if has_nan else None, pad, bad_dy)

    def restrict(self, hit: Any, k: int) -> None:
        """Drop padding positions from offset ``k``'s ties (only a ``-inf`` maximum ties them)."""
        if self.pad:
            hit &= self._inside(k)

    def route_nan(self, hit: Any, k: int) -> None:
        """In NaN windows, offset ``k`` takes the gradient exactly when it holds the last NaN."""
        if self.nan is not None:
            xp = get_array_module(hit)
            xp.copyto(hit, self.last_nan == k, where=self.nan)

    def _inside(self, k: int) -> Any:
        """Which output positions' offset-``k`` element lies inside the image, ``(*out)``."""
        g = self.geom
        offset = np.unravel_index(k, g.ksize)
        axes = []
        for a, (o, n) in enumerate(zip(offset, self.in_size)):
            pos = o * g.dilation[a] + g.stride[a] * np.arange(self.out[a]) - g.pad[a]
            shape = [1] * len(self.out)
            shape[a] = -1  # this axis's positions, broadcast against the others
            axes.append(((pos >= 0) & (pos < n)).reshape(shape))
        return self.xp.asarray(functools.reduce(np.logical_and, axes))
