"""Sequence layers: :class:`SequenceConcat`.

A sequence batch is rows plus ``seq_starts`` (``n_seqs + 1`` row offsets); the offset arithmetic
lives in :mod:`distconv.kernels.sequence`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.kernels.activation import ActivationFunction
from distconv.kernels.bias import add_bias, row_sums
from distconv.kernels.sequence import check_offsets, segment_ids
from distconv.layers.base import Layer, checked, size_arg
from distconv.layers.inputs import grad_target, values_of
from distconv.parameter import UpdateCallback


class SequenceConcat(Layer):
    """Concatenate two sequence batches sequence by sequence: ``a0 b0 a1 b1 ...``.

    Paddle's ``SequenceConcatLayer``: input ``a`` and input ``b`` hold the same number of
    sequences of rows of the same width; output sequence ``i`` is sequence ``i`` of ``a``
    followed by sequence ``i`` of ``b``. The row order is a permutation built once per forward
    from the offsets with array operations; backward routes each row of the output gradient
    back to the row it came from.

    :meth:`~distconv.trainer.Trainer.fit` cannot train its main use, two feeds each with
    offsets of its own (a question and its answer): a
    :class:`~distconv.sequence_set.SequenceSet` holds one ``seq_starts`` for all its row feeds,
    so ``fit`` concatenates only two sequences made from one feed, and refuses a
    ``SoftmaxCrossEntropy`` or ``MSELoss`` reading labels of the set after it (two rows a
    token). Train two ragged feeds in a loop of one's own: a ``SequenceSet`` per feed, each
    step's sentences from :meth:`~distconv.sampler.GlobalBatchSampler.passes`, fed as
    ``{**q.feeds(index), **a.feeds(index)}`` (docs/operations.md, "Sequences").

    Args:
        width: the row width; checked against the inputs when given, required with a bias.
        bias: add one learned value per column.
        act: activation applied to the output.
        dtype: the bias dtype.
        name: layer name.

    Shape:
        - Inputs: ``a`` ``(Na, width)`` with ``seq_starts`` of ``n + 1`` offsets, ``b``
          ``(Nb, width)`` with ``n + 1`` offsets.
        - Output: ``(Na + Nb, width)``; ``seq_starts = a.seq_starts + b.seq_starts``.

    Attributes:
        bias: ``(width,)`` or None.
    """

    num_inputs = 2

    def __init__(
        self,
        width: int | None = None,
        bias: bool = False,
        act: str | ActivationFunction | None = None,
        *,
        dtype: Any = np.float32,
        name: str | None = None,
    ) -> None:
        super().__init__(act=act, name=name)
        width = None if width is None else size_arg(self, "width", width)
        if bias and width is None:
            raise self.fail("a bias needs width (one bias value per column)")
        self.width = width
        self.bias = self.make_bias("bias", (width,), dtype) if bias else None

    def _check(self, a: Arg, b: Arg) -> tuple[Any, Any]:
        for what, x in (("input 0", a), ("input 1", b)):
            if x.value is None or x.value.ndim != 2:
                shape = None if x.value is None else tuple(x.value.shape)
                raise self.fail(f"{what} must hold rows of shape (N, width), got {shape}")
            values_of(self, x)  # integer rows: an activation truncated them (sigmoid to 0)
        wa, wb = a.value.shape[1], b.value.shape[1]
        if wa != wb or (self.width is not None and wa != self.width):
            want = f" (built for width {self.width})" if self.width is not None else ""
            raise self.fail(f"inputs differ in width: {wa} and {wb}{want}")
        xp = get_array_module(a.value)
        sa, sb = (
            checked(self, check_offsets, x.seq_starts, len(x.value), xp, f"input {i}'s seq_starts")
            for i, x in enumerate((a, b))
        )
        if len(sa) != len(sb):
            raise self.fail(
                f"inputs hold different numbers of sequences: {len(sa) - 1} and {len(sb) - 1}"
            )
        return sa, sb

    def _forward(self, a: Arg, b: Arg) -> Any:
        sa, sb = self._check(a, b)
        xp = get_array_module(a.value)
        na, nb = a.value.shape[0], b.value.shape[0]
        # Row j of sequence i of ``a`` lands after the i earlier b-sequences: j + sb[i]; row j of
        # sequence i of ``b`` lands after a's first i + 1 sequences: j + sa[i + 1].
        self._pos_a = xp.arange(na) + sb[segment_ids(sa, na)]
        self._pos_b = xp.arange(nb) + sa[segment_ids(sb, nb) + 1]
        self._starts = sa + sb
        y = xp.empty((na + nb, a.value.shape[1]), dtype=xp.result_type(a.value, b.value))
        y[self._pos_a] = a.value
        y[self._pos_b] = b.value
        return y if self.bias is None else add_bias(y, self.bias.value)

    def make_output(self, y: Any, inputs: tuple[Arg, ...]) -> Arg:
        return Arg(y, seq_starts=self._starts)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        if self.bias is not None:
            if not self.bias.static:
                self.bias.grad += row_sums(dz)
            self.bias.inc_update(callback)
        xp = get_array_module(dz)
        for x, pos in zip(self.inputs, (self._pos_a, self._pos_b)):
            dx = grad_target(x)
            if dx is not None:
                dx += xp.take(dz, pos, axis=0)
