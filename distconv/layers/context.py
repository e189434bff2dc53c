"""The context projection: a window of rows within each sequence, Paddle's ``ContextProjection``.

The index of the window is built on the device from the offsets
(:func:`~distconv.kernels.sequence.context_index`); nothing is copied to the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.init import Initializer
from distconv.kernels.rows import RowScatter
from distconv.kernels.sequence import check_offsets, context_index
from distconv.kernels.shape import is_int
from distconv.layers.base import checked, size_arg
from distconv.layers.part import Projection, WeightSpec
from distconv.parameter import Parameter


class ContextProjection(Projection):
    """A window of rows within each sequence, concatenated: Paddle's ``ContextProjection``.

    Output row ``t`` holds input rows ``t + context_start ... t + context_start +
    context_length - 1`` side by side, counting only rows of ``t``'s own sequence; slots that
    fall outside the sequence hold zeros, or trainable padding rows.

    Args:
        width: input columns ``D``.
        context_length: rows in the window.
        context_start: offset of the window's first row (may be negative); default
            ``-(context_length - 1) // 2`` with floor division, Paddle's rule (its config helper
            divides by 2 in Python 2): a window centred on the row, and for an even length one
            row more before it than after it (-1 for length 2, -2 for length 4).
        trainable_padding: learn the rows read outside a sequence instead of using zeros.
        init: initialiser of the padding (zeros by default, as the untrained case).
        dtype, weight: see :class:`Projection`.

    Shape:
        - Input: ``(N, D)`` with ``Arg.seq_starts``.
        - Output: ``(N, context_length * D)``; slot ``j`` in columns ``j*D:(j+1)*D``.

    Attributes:
        begin_pad: ``max(0, -context_start)`` padding rows before a sequence.
        end_pad: ``max(0, context_start + context_length - 1)`` padding rows after one.
        weight: ``(begin_pad + end_pad, D)`` when ``trainable_padding`` (and non-empty), else None.
    """

    @property
    def takes_integer_values(self) -> bool:  # type: ignore[override]
        """An integer input beside learnt padding would compute in float64 (their result_type),
        not in the padding's dtype; zeros in the input's dtype read it exactly."""
        return self.weight is None

    def __init__(
        self,
        width: int,
        context_length: int,
        context_start: int | None = None,
        trainable_padding: bool = False,
        *,
        init: str | Initializer = "zero",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
    ) -> None:
        context_length = size_arg(self, "context_length", context_length)
        if context_start is not None and not is_int(context_start):
            raise self.fail(f"context_start={context_start!r} must be an int or None")
        if context_start is None:
            context_start = -(context_length - 1) // 2  # floors: -2 for 4, as Paddle
        self.context_length, self.context_start = context_length, int(context_start)
        self.begin_pad = max(0, -context_start)
        self.end_pad = max(0, context_start + context_length - 1)
        pad_rows = self.begin_pad + self.end_pad
        self.trainable_padding = trainable_padding
        shape = (pad_rows, width) if trainable_padding and pad_rows else None
        if shape is None and weight is not None:
            # the shape check said "needs None", as though the given shape were the fault
            why = (
                "trainable_padding=False"
                if not trainable_padding
                else f"the window (start {self.context_start}, length {context_length}) reads "
                "no row outside a sequence"
            )
            raise self.fail(f"has no padding rows to learn ({why}), so no weight to share")
        spec = WeightSpec(shape, (width, width), init, dtype, weight)
        super().__init__(width, width * context_length, spec)

    def forward(self, input: Arg, out: Any) -> None:
        x = self._rows(input, self.in_width)
        xp = get_array_module(x)
        n, pad_rows = x.shape[0], self.begin_pad + self.end_pad
        if input.seq_starts is None:
            raise self.fail("needs a sequence input (Arg.seq_starts; fit: feed a SequenceSet)")
        starts = checked(self, check_offsets, input.seq_starts, n, xp, "the input's seq_starts")
        index, outside = context_index(
            starts, n, self.context_start, self.context_length, self.begin_pad
        )
        pad = (
            self.weight.value
            if self.weight is not None
            else xp.zeros((pad_rows, x.shape[1]), x.dtype)
        )
        # in result_type(x, padding), as every projection computes: a float32 input once
        # rounded float64 learnt padding to float32 in a float64 output
        table = xp.concatenate([x, pad])
        index = index.reshape(-1)
        out += table[index].reshape(n, self.out_width)  # -1 cannot size an empty batch
        # zeros read outside a sequence get no gradient; learnt padding does
        keep = None if self.weight is not None else ~outside.reshape(-1)
        self._gather = (index, keep)

    def _backward(self, input: Arg, dout: Any) -> None:
        dx = self._grad_rows(input)
        if dx is None and not self.needs_weight_grad:
            return
        xp = get_array_module(dout)
        n, d = dout.shape[0], self.in_width
        dtable = xp.zeros((n + self.begin_pad + self.end_pad, d), dtype=dout.dtype)
        RowScatter(*self._gather).add(dtable, dout.reshape(-1, d))
        if dx is not None:
            dx += dtable[:n]
        if self.needs_weight_grad:
            self.weight.grad += dtable[n:]

    def __repr__(self) -> str:
        return (
            f"{self.label}({self.in_width}, length={self.context_length}, "
            f"start={self.context_start}, trainable_padding={self.trainable_padding})"
        )
