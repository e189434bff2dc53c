"""Selective fully connected layer: ``sum_i x_i W_i^T + b`` computed only at chosen columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import inf
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module, widened
from distconv.kernels.activation import Softmax
from distconv.kernels.bias import add_bias, row_sums
from distconv.kernels.parallel import matmul
from distconv.kernels.rows import compact_columns
from distconv.kernels.sequence import check_offsets, segment_ids
from distconv.layers.base import checked
from distconv.layers.fc import FullyConnected
from distconv.layers.inputs import grad_target
from distconv.layers.written_rows import EVERY_ROW, note_rows
from distconv.parameter import UpdateCallback

METHODS = ("auto", "sparse", "dense")

#: Largest selected fraction (columns per sample / out_features) for which ``"auto"`` gathers
#: the selected weight rows instead of running the dense product and picking columns: the
#: crossover measured by ``benchmarks/selective_fc.py`` (see docs/benchmarks.md), which is also
#: Paddle's ``selective_fc_full_mul_ratio``.
SPARSE_MAX_DENSITY = 0.02


@dataclass
class Selection:
    """The chosen columns of one forward, as a dense ``(N, k)`` table.

    Attributes:
        cols: column indices, ``(N, k)``; ``-1`` marks padding of an uneven selection.
        safe: ``cols`` with padding replaced by column 0, safe to index with.
        pad: boolean mask of the padding, or None when every sample selects ``k`` columns.
    """

    cols: Any
    safe: Any
    pad: Any = None


class SelectiveFullyConnected(FullyConnected):
    """A fully connected layer that computes only the output columns each sample selects.

    Paddle's ``SelectiveFullyConnectedLayer``, for wide outputs (large vocabularies, sampled
    softmax) where a sample needs a few columns out of many. Like Paddle's, it sums several
    data inputs, each with its own weight (``in_features`` a sequence). Called with its data
    inputs alone it is an ordinary fully connected layer (full output). Called with one more
    input, the selection, output column ``t`` of sample ``b`` is
    ``sum_i x_i[b] . W_i[cols[b, t]] + bias[cols[b, t]]``, and in backward the weight and bias
    gradients touch only the selected rows.

    The selection is an Arg with integer column indices in ``ids``, either

    - CSR: ``Arg(ids=indices, seq_starts=indptr)``, sample ``b`` selecting
      ``indices[indptr[b]:indptr[b + 1]]`` (``indptr`` has ``N + 1`` entries), or
    - a table: ``Arg(ids=cols)`` with ``cols`` of shape ``(N, k)``, or the integer array
      ``cols`` itself (an Arg's integer ``value`` is read as its ids).

    In a :class:`~distconv.network.Network` it is simply the layer's last input (a feed): the
    integer ``(N, k)`` array, as ``fit`` and ``forward`` take it, or an Arg built as above.
    Training needs the same number ``k`` of columns in every sample; a label for the output
    must then be the *position* of the gold column within the sample's selection. With
    ``inference=True`` the counts may differ: the output is padded to the largest count with
    ``pad_value`` (before the activation; ``-inf``, or a value the dtype holds as ``-inf``,
    makes a softmax give the padding zero probability, and a sample that selects nothing
    zeros throughout) and backward refuses to run. A softmax ``act`` is for a model without
    :class:`~distconv.layers.loss.SoftmaxCrossEntropy` on top: that loss applies its own, and a
    Network refuses a softmax under it.

    Two ways to compute, picked by ``method``: ``"sparse"`` gathers the selected weight rows
    and multiplies each sample by its own rows (work ``N*k*in``); ``"dense"`` runs the full
    product and picks the columns (``N*out*in`` but at BLAS speed). ``"auto"`` takes the
    gather when ``k / out_features <= SPARSE_MAX_DENSITY``. The weight gradient is always one
    product over the columns selected anywhere in the batch, which costs no more than a full
    layer's.

    Args:
        in_features, out_features, bias, act, init, dtype, weight, name: as
            :class:`~distconv.layers.fc.FullyConnected`; ``out_features`` is the width of the
            full output, and a softmax ``act`` runs over the selected columns (not under a
            ``SoftmaxCrossEntropy``, which takes logits).

    Keyword-only options of its own:
        method: ``"auto"``, ``"sparse"`` or ``"dense"`` (see above).
        inference: allow uneven selections (forward only).
        pad_value: pre-activation value of the padding of uneven selections.
        sparse: mark the weights and the bias ``sparse_rows`` (their rows are output
            columns): a parameter server then moves only the rows of the columns each batch
            selects (every row when the layer runs without a selection), and its optimizer
            updates only those. The other columns' momentum, Adam moments and weight decay
            wait until a batch selects them ("lazy" updates), so with those a parameter
            server trains this layer differently from one process or MPI; with plain SGD
            they agree. Shared weights marked elsewhere stay marked.

    Shape:
        - Data input ``i``: ``(N, in_features[i])`` or ``(N, *)`` with that many elements.
        - Last input (optional): the selection, ``k`` columns per sample (see above).
        - Output: ``(N, k)`` with a selection, ``(N, out_features)`` without; sequence offsets
          pass through from input 0. With a selection the output's ``ids`` holds the
          ``(N, k)`` column indices (``-1`` for padding).

    Attributes:
        weights: one ``(out_features, in_features[i])`` Parameter per data input.
        weight: ``weights[0]``.
        bias: ``(out_features,)`` or None.
        selection: the :class:`Selection` of the last forward, None after a full one.
    """

    def _configure(
        self,
        method: str = "auto",
        inference: bool = False,
        pad_value: float = float("-inf"),
        sparse: bool = False,
    ) -> None:
        if sparse:  # the bias too: whole, it moved more bytes a step than the sparse weights
            for p in (*self.weights, self.bias):
                if p is not None:
                    p.mark_sparse_rows()
        k = len(self.in_widths)
        self.num_inputs = (k, k + 1)  # the data inputs, then the selection if any
        if method not in METHODS:
            raise self.fail(f"method must be one of {METHODS}, got {method!r}")
        self.method = method
        self.inference = inference
        try:  # "x" failed at the first uneven selection, deep in numpy; None padded with NaN
            self.pad_value = float(pad_value)
        except (TypeError, ValueError, OverflowError):  # 10**400: "int too large to convert"
            raise self.fail(f"pad_value must be a number, got {pad_value!r}") from None
        self.selection: Selection | None = None

    @property
    def full_output(self) -> bool:
        """Whether the last forward computed every column (no selection given)."""
        return self.selection is None

    # -- selection ------------------------------------------------------------------------------
    def id_range(self, index: int, count: int) -> tuple[int, int] | None:
        """The selection (the last input, after the data inputs) holds columns of the full
        output; none where the layer is wired to another number of inputs (its forward names
        that)."""
        selection = len(self.in_widths)
        return (0, self.out_features) if index == selection == count - 1 else None

    def _selected_ids(self, sel: Arg, xp: Any) -> Any:
        """The selection's column indices, checked to be integers in ``[0, out_features)``.

        They are ``Arg.ids``, or an integer ``value``: ``Network.forward`` takes a raw array
        as a value where ``fit`` feeds an integer one as ids, and :class:`TableProjection`
        reads either; this layer told a user who fed integer columns to "feed integer column
        indices"."""
        ids = sel.ids
        if ids is None and sel.value is not None and sel.value.dtype.kind in "iu":
            ids = sel.value
        if ids is None:  # fit feeds a float array as values: the user built no Arg
            got = "nothing" if sel.value is None else f"{sel.value.dtype} values"
            raise self.fail(
                f"the selection (last input) must be integer column indices, got {got}: feed "
                "an integer array, or Arg(ids=cols)"
            )
        ids = xp.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise self.fail(f"selected columns must be integers, got dtype {ids.dtype}")
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.out_features):
            raise self.fail(
                f"selected columns must lie in [0, {self.out_features}), got range "
                f"[{int(ids.min())}, {int(ids.max())}]"
            )
        return ids

    def _got(self, x: Arg) -> str:
        """Integer ids given as a data input that fit no data input's width are the selection
        out of place; ids of a data input's width are integer data, told to cast them as a
        :class:`FullyConnected` tells them (told to move a selection, they led away from it)."""
        ids = x.ids
        if x.value is None and ids is not None and ids.dtype.kind in "iu" and ids.ndim:
            rows = ids.shape[0]
            if ids.ndim < 2 or all(ids.size != rows * width for width in self.in_widths):
                return (
                    "integer ids: the selection is the last input (inputs are [data..., selection])"
                )
        return super()._got(x)

    def _select(self, sel: Arg, n: int, xp: Any) -> Selection:
        """Validate the selection input and lay it out as an ``(n, k)`` table."""
        ids = self._selected_ids(sel, xp)
        if sel.seq_starts is None:
            if ids.ndim != 2 or ids.shape[0] != n:
                raise self.fail(
                    f"a selection without seq_starts must be a ({n}, k) table of columns, "
                    f"got ids of shape {tuple(ids.shape)}"
                )
            self._refuse_a_mask(ids)
            return Selection(ids, ids)
        if ids.ndim != 1:
            raise self.fail(f"CSR selection ids must be 1-D, got shape {tuple(ids.shape)}")
        what = "the selection's seq_starts"
        indptr = checked(self, check_offsets, sel.seq_starts, ids.size, xp, what)
        if len(indptr) != n + 1:
            raise self.fail(
                f"the selection has {len(indptr) - 1} rows (seq_starts of length "
                f"{len(indptr)}) for a batch of {n} samples"
            )
        return self._table(ids, indptr, n, xp)

    def _refuse_a_mask(self, cols: Any) -> None:
        """Refuse a table of 0s and 1s as wide as the output: a mask over its columns (Paddle's
        ``select`` is one), which read as column indices selected columns 0 and 1 over and
        over and trained without a word, as ``fit`` and ``forward`` feed an integer array."""
        out = self.out_features
        if out > 2 and cols.shape[1] == out and cols.size and int(cols.max()) <= 1:
            raise self.fail(
                f"the selection is a table of 0s and 1s as wide as the output ({out}): a mask "
                "over its columns, where it takes column indices; for a mask m feed "
                "Arg(ids=np.nonzero(m)[1], seq_starts=np.r_[0, np.cumsum(m.sum(axis=1))])"
            )

    def _table(self, ids: Any, indptr: Any, n: int, xp: Any) -> Selection:
        counts = xp.diff(indptr)
        lo, hi = (int(counts.min()), int(counts.max())) if n else (0, 0)
        if lo == hi:
            return Selection(ids.reshape(n, hi), ids.reshape(n, hi))
        if not self.inference:
            raise self.fail(
                f"every sample must select the same number of columns to train, got counts "
                f"from {lo} to {hi}; build the layer with inference=True to pad uneven "
                "selections (forward only)"
            )
        rows = segment_ids(indptr, ids.size)
        cols = xp.full((n, hi), -1, dtype=xp.int64)  # signed for the -1 pads: ids may be uint
        cols[rows, xp.arange(ids.size) - indptr[rows]] = ids
        pad = cols < 0
        return Selection(cols, xp.where(pad, 0, cols), pad)

    def _sparse(self, k: int) -> bool:
        if self.method == "auto":
            return k <= SPARSE_MAX_DENSITY * self.out_features
        return self.method == "sparse"

    def rows_read(self, feeds: Sequence[Arg | None]) -> list[tuple[str, Any]]:
        """The rows of its sparse weights and bias a forward reads: the selected columns, or
        all without a selection (a forward reads ``bias[cols]`` as it reads ``W[cols]``).

        Raises:
            LayerError: the selection is computed by another layer (unknown before forward).
        """
        reads = super().rows_read(feeds)
        k = len(self.weights)
        if len(feeds) == k or not reads:
            return reads
        if feeds[k] is None:
            raise self.fail(
                "its selection (last input) comes from another layer, so the rows of its "
                "sparse weights are unknown before forward; feed the selection directly"
            )
        xp = get_array_module(self.weight.value)
        cols = xp.unique(self._selected_ids(feeds[k], xp))
        return [(name, cols) for name, _ in reads]  # its parameters are weights and bias

    # -- forward --------------------------------------------------------------------------------
    def _forward(self, *inputs: Arg) -> Any:
        self.selection = None
        k = len(self.in_widths)
        if len(inputs) == k:
            return super()._forward(*inputs)
        xs = self._flats(inputs[:k])
        xp = get_array_module(xs[0])
        s = self.selection = self._select(inputs[k], xs[0].shape[0], xp)
        y = None
        for v, w in zip(xs, self.weights):
            if self._sparse(s.safe.shape[1]):
                p = _gathered_rows_times(w.value[s.safe], v)
            else:
                p = xp.take_along_axis(matmul(v, w.value.T), s.safe, axis=1)
            y = p if y is None else y + p
        if self.bias is not None:  # in result_type(y, bias), as the full product's bias
            y = add_bias(y, self.bias.value[s.safe])
        if s.pad is not None:
            y[s.pad] = self._pad_held(y)  # -1e5 as float16 holds it: no overflow warning
        return y

    def make_output(self, y: Any, inputs: tuple[Arg, ...]) -> Arg:
        out = super().make_output(y, inputs)
        if self.selection is not None:
            out.ids = self.selection.cols
            pad = self.selection.pad
            if pad is not None and isinstance(self.act, Softmax) and self._pad_held(y) == -inf:
                # a sample that selects nothing is all -inf padding, which the softmax leaves
                # NaN (no softmax exists); its padding has probability 0, as in every row
                y[pad.all(axis=1)] = 0
        return out

    def _pad_held(self, y: Any) -> float:
        """``pad_value`` as ``y``'s dtype holds it: -1e5 is -inf in float16."""
        with np.errstate(over="ignore"):
            return float(y.dtype.type(self.pad_value))

    # -- backward -------------------------------------------------------------------------------
    def backward(self, callback: UpdateCallback) -> None:
        if self.selection is not None and self.selection.pad is not None:
            raise self.fail(
                "backward after a forward with uneven (padded) selections; inference mode "
                "is forward-only"
            )
        super().backward(callback)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        if self.selection is None:  # the full product's gradient: every row of each
            for p in (*self.weights, self.bias):
                if p is not None and not p.static:
                    note_rows(p, EVERY_ROW)  # (noted first: the base fires them)
            super()._backward(dz, callback)
            return
        b, cols = self.bias, self.selection.cols
        sparse = self._sparse(cols.shape[1])
        want_db = b is not None and not b.static
        want_dx = [grad_target(x) for x in self.inputs[: len(self.weights)]]
        # One compaction serves bias, weight and (dense path) input gradients; skip it when
        # nothing needs it (all static, no input gradient).
        if (
            want_db
            or any(not w.static for w in self.weights)
            or (not sparse and any(d is not None for d in want_dx))
        ):
            used, dzu = compact_columns(dz, cols, self.out_features)
        if b is not None:
            if want_db:
                b.grad[used] += row_sums(dzu)
                note_rows(b, used)  # the rows just written (EVERY_ROW: all used), for a push
            b.inc_update(callback)
        for i, (x, w, dx) in enumerate(zip(self.inputs, self.weights, want_dx)):
            if dx is not None:  # before inc_update: the callback may change the weight
                if sparse:
                    g = _times_gathered_rows(dz, w.value[cols])
                else:
                    g = matmul(dzu, w.value[used])
                dx += g.reshape(dx.shape)
            if not w.static:
                w.grad[used] += matmul(dzu.T, self._flat(x, i))
                note_rows(w, used)
            w.inc_update(callback)


def _gathered_rows_times(rows: Any, v: Any) -> Any:
    """``einsum("bki,bi->bk", rows, v)``: each sample's gathered weight rows times its input.

    numpy's einsum refuses ``ml_dtypes``' types ("invalid data type for einsum": a bfloat16
    layer with a sparse selection failed its first forward); they take matmul, which returns
    float32 as the dense path's product does. numpy's own floats keep einsum and its bits.
    """
    if rows.dtype.kind != "V" and v.dtype.kind != "V":
        return get_array_module(rows).einsum("bki,bi->bk", rows, v)
    return (rows @ v[:, :, None])[:, :, 0]


def _times_gathered_rows(dz: Any, rows: Any) -> Any:
    """``einsum("bk,bki->bi", dz, rows)``, by matmul for ``ml_dtypes``' types (see
    :func:`_gathered_rows_times`); a float16 ``dz`` in float32, so float32 comes out.

    einsum adds float16 in float16 over this contraction (its ``k`` columns run across the
    rows, not along them): 4096 columns of 0.1 times 1 came to 256, not 409.6.
    """
    if dz.dtype.kind != "V" and rows.dtype.kind != "V":
        dz = widened(dz)  # einsum then computes a float16 dz in float32
        return get_array_module(dz).einsum("bk,bki->bi", dz, rows)
    return (dz[:, None, :] @ rows)[:, 0, :]
