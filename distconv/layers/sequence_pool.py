"""Sequence pooling: :class:`SequencePool`, each sequence of a sequence batch reduced to one row.

A sequence batch is rows plus ``seq_starts`` (``n_seqs + 1`` row offsets); the offset arithmetic
lives in :mod:`distconv.kernels.sequence`.
"""

from __future__ import annotations

from typing import Any

from distconv.arg import Arg
from distconv.backend import get_array_module, sum_dtype
from distconv.kernels.rows import segment_sums
from distconv.kernels.sequence import check_offsets, segment_argmax, segment_ids
from distconv.layers.base import Layer, checked
from distconv.layers.inputs import grad_target, values_of
from distconv.parameter import UpdateCallback

#: what :class:`SequencePool` reduces a sequence to, by mode
MODES = ("average", "sum", "max", "last", "first")


class SequencePool(Layer):
    """One row per sequence: its rows' average, sum or column-wise maximum, or its last or first
    row.

    Paddle's ``AverageLayer`` (``"average"``, ``"sum"``), ``MaxLayer`` (``"max"``) and
    ``SequenceLastInstanceLayer`` (``"last"``, ``"first"``). The output is a plain batch of one
    example per sequence, with no ``seq_starts``: what a ``FullyConnected`` and a
    ``SoftmaxCrossEntropy`` with one label per sequence take.

    An empty sequence (no rows) pools to a row of zeros in every mode, and gives no gradient.
    ``"max"`` routes each column's gradient to the row that won it, the first of equal maxima
    (a NaN beats every number); ``"last"`` and ``"first"`` to that row. Forward and backward
    are a few array operations over all rows at once, on numpy and cupy alike.

    Args:
        mode: ``"average"``, ``"sum"``, ``"max"``, ``"last"`` or ``"first"``.
        name: layer name.

    Shape:
        - Input: ``(N, width)`` float rows with ``seq_starts`` of ``n + 1`` offsets.
        - Output: ``(n, width)``, without ``seq_starts``.
    """

    def __init__(self, mode: str = "average", *, name: str | None = None) -> None:
        super().__init__(name=name)
        if not isinstance(mode, str) or mode not in MODES:
            raise self.fail(f"mode={mode!r} is not one of {', '.join(map(repr, MODES))}")
        self.mode = mode

    def settings(self) -> dict[str, Any]:
        """:meth:`Layer.settings` and the mode, which no parameter shows."""
        return super().settings() | {"mode": self.mode}

    def _forward(self, x: Arg) -> Any:
        v = values_of(self, x)
        if v.ndim != 2:
            raise self.fail(f"the input must hold rows of shape (N, width), got {tuple(v.shape)}")
        xp = get_array_module(v)
        rows, width = v.shape
        starts = checked(self, check_offsets, x.seq_starts, rows, xp)
        n = len(starts) - 1
        self._seg = segment_ids(starts, rows)
        if self.mode == "sum":  # in float32 for 16-bit rows, rounded once
            return segment_sums(v, starts, sum_dtype(v.dtype)).astype(v.dtype, copy=False)
        if self.mode == "average":  # 16-bit rows: the sum divided in float32, rounded once
            y = segment_sums(v, starts, sum_dtype(v.dtype))
            # an empty sequence's sum is 0: divided by 1, it stays
            self._lengths = xp.maximum(starts[1:] - starts[:-1], 1).astype(y.dtype)[:, None]
            y /= self._lengths
            return y.astype(v.dtype, copy=False)
        if self.mode == "max":
            self._won = segment_argmax(v, self._seg, n)
        else:  # the one row of a sequence that counts, the whole row
            row = starts[:-1] if self.mode == "first" else starts[1:] - 1
            self._won = xp.where(starts[1:] > starts[:-1], row, rows)[:, None]
        if rows == 0:  # every sequence empty: no row to pick from
            return xp.zeros((n, width), dtype=v.dtype)
        picked = v[xp.minimum(self._won, rows - 1), xp.arange(width)]
        return xp.where(self._won < rows, picked, v.dtype.type(0))

    def make_output(self, y: Any, inputs: tuple[Arg, ...]) -> Arg:
        return Arg(y)  # one example per sequence: no sequences left

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        dx = grad_target(self.inputs[0])
        if dx is None:
            return
        xp = get_array_module(dz)
        if self.mode in ("max", "last", "first"):  # each column's gradient to the row that won
            rows, width = dx.shape
            # one scatter of n x width values, not a pass over every row with its sequence's
            # gradient: no two sequences win one cell; row ``rows`` catches the empty ones'
            spread = xp.zeros((rows + 1, width), dtype=dz.dtype)
            spread[self._won, xp.arange(width)] = dz
            dx += spread[:rows]
            return
        if self.mode == "average":  # divided in float32 for 16-bit rows, rounded once
            dz = (dz / self._lengths).astype(dz.dtype, copy=False)
        dx += xp.take(dz, self._seg, axis=0)  # each row its own sequence's gradient
