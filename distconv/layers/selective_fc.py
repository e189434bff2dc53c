"""Selective fully connected layer: ``x W^T + b`` computed only at chosen output columns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.kernels.activation import ActivationFunction
from distconv.layers.base import grad_target
from distconv.layers.fc import FullyConnected
from distconv.layers.sequence import check_offsets, segment_ids
from distconv.parameter import Parameter, UpdateCallback

METHODS = ("auto", "sparse", "dense")

#: Largest selected fraction (columns per sample / out_features) for which ``"auto"`` gathers
#: the selected weight rows instead of running the dense product and picking columns.
#: Measured forward + backward, float32, 4096 outputs, one BLAS thread (ms, sparse / dense):
#: batch 64 x 256 inputs: 1% 4.9 / 9.0, 2% 11 / 14, 5% 20 / 14, 10% 28 / 13, 100% 343 / 18;
#: batch 128 x 512 inputs: 1% 25 / 38, 2% 39 / 40, 5% 66 / 46, 10% 134 / 33, 100% 1191 / 58.
#: The crossover sits near 2%, which is also Paddle's ``selective_fc_full_mul_ratio``.
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
    softmax) where a sample needs a few columns out of many. Called with one input it is an
    ordinary fully connected layer (full output). Called with a second input, the selection,
    output column ``t`` of sample ``b`` is ``x[b] . W[cols[b, t]] + bias[cols[b, t]]``, and in
    backward the weight and bias gradients touch only the selected rows.

    The selection is an Arg with integer column indices in ``ids``, either

    - CSR: ``Arg(ids=indices, seq_starts=indptr)``, sample ``b`` selecting
      ``indices[indptr[b]:indptr[b + 1]]`` (``indptr`` has ``N + 1`` entries), or
    - a table: ``Arg(ids=cols)`` with ``cols`` of shape ``(N, k)``.

    In a :class:`~distconv.network.Network` it is simply the layer's second input (a feed).
    Training needs the same number ``k`` of columns in every sample; a label for the output
    must then be the *position* of the gold column within the sample's selection. With
    ``inference=True`` the counts may differ: the output is padded to the largest count with
    ``pad_value`` (before the activation; ``-inf`` makes a softmax give the padding zero
    probability) and backward refuses to run.

    Two ways to compute, picked by ``method``: ``"sparse"`` gathers the selected weight rows
    and multiplies each sample by its own rows (work ``N*k*in``); ``"dense"`` runs the full
    product and picks the columns (``N*out*in`` but at BLAS speed). ``"auto"`` takes the
    gather when ``k / out_features <= SPARSE_MAX_DENSITY``. The weight gradient is always one
    product over the columns selected anywhere in the batch, which costs no more than a full
    layer's.

    Args:
        in_features: features per sample (``C*H*W`` for an image input).
        out_features: columns of the full output.
        bias: whether to add a bias.
        act: activation applied to the output (softmax: over the selected columns).
        init: weight initialiser name.
        dtype: parameter dtype.
        weight: share an existing ``(out, in)`` weight Parameter.
        method: ``"auto"``, ``"sparse"`` or ``"dense"`` (see above).
        inference: allow uneven selections (forward only).
        pad_value: pre-activation value of the padding of uneven selections.
        name: layer name.

    Shape:
        - Input 0: ``(N, in_features)`` or ``(N, *)`` with ``in_features`` elements per sample.
        - Input 1 (optional): the selection, ``k`` columns per sample (see above).
        - Output: ``(N, k)`` with a selection, ``(N, out_features)`` without; sequence offsets
          pass through from input 0. With a selection the output's ``ids`` holds the
          ``(N, k)`` column indices (``-1`` for padding).

    Attributes:
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or None.
        selection: the :class:`Selection` of the last forward, None after a full one.
    """

    num_inputs = (1, 2)

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        act: str | ActivationFunction | None = None,
        *,
        init: str = "msra",
        dtype: Any = np.float32,
        weight: Parameter | None = None,
        method: str = "auto",
        inference: bool = False,
        pad_value: float = float("-inf"),
        name: str | None = None,
    ) -> None:
        super().__init__(
            in_features, out_features, bias, act, init=init, dtype=dtype, weight=weight, name=name
        )
        if method not in METHODS:
            raise self.fail(f"method must be one of {METHODS}, got {method!r}")
        self.method = method
        self.inference = inference
        self.pad_value = pad_value
        self.selection: Selection | None = None

    @property
    def full_output(self) -> bool:
        """Whether the last forward computed every column (no selection given)."""
        return self.selection is None

    # -- selection ------------------------------------------------------------------------------
    def _select(self, sel: Arg, n: int, xp: Any) -> Selection:
        """Validate the selection input and lay it out as an ``(n, k)`` table."""
        if sel.ids is None:
            raise self.fail("the selection (input 1) must carry column indices in Arg.ids")
        ids = xp.asarray(sel.ids)
        if ids.dtype.kind not in "iu":
            raise self.fail(f"selected columns must be integers, got dtype {ids.dtype}")
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.out_features):
            raise self.fail(
                f"selected columns must lie in [0, {self.out_features}), got range "
                f"[{int(ids.min())}, {int(ids.max())}]"
            )
        if sel.seq_starts is None:
            if ids.ndim != 2 or ids.shape[0] != n:
                raise self.fail(
                    f"a selection without seq_starts must be an ({n}, k) table of columns, "
                    f"got ids of shape {tuple(ids.shape)}"
                )
            return Selection(ids, ids)
        if ids.ndim != 1:
            raise self.fail(f"CSR selection ids must be 1-D, got shape {tuple(ids.shape)}")
        indptr = check_offsets(self, sel.seq_starts, ids.size, "the selection (input 1)", xp)
        if len(indptr) != n + 1:
            raise self.fail(
                f"the selection has {len(indptr) - 1} rows (seq_starts of length "
                f"{len(indptr)}) for a batch of {n} samples"
            )
        return self._table(ids, indptr, n, xp)

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
        cols = xp.full((n, hi), -1, dtype=ids.dtype)
        cols[rows, xp.arange(ids.size) - indptr[rows]] = ids
        pad = cols < 0
        return Selection(cols, xp.where(pad, 0, cols), pad)

    def _sparse(self, k: int) -> bool:
        if self.method == "auto":
            return k <= SPARSE_MAX_DENSITY * self.out_features
        return self.method == "sparse"

    # -- forward --------------------------------------------------------------------------------
    def _forward(self, x: Arg, sel: Arg | None = None) -> Any:
        self.selection = None
        if sel is None:
            return super()._forward(x)
        v = self._flat(x)
        xp = get_array_module(v)
        s = self.selection = self._select(sel, v.shape[0], xp)
        w = self.weight.value
        if self._sparse(s.safe.shape[1]):
            y = xp.einsum("bki,bi->bk", w[s.safe], v)
        else:
            y = xp.take_along_axis(v @ w.T, s.safe, axis=1)
        if self.bias is not None:
            y += self.bias.value[s.safe]
        if s.pad is not None:
            y[s.pad] = self.pad_value
        return y

    def make_output(self, y: Any, inputs: tuple[Arg, ...]) -> Arg:
        out = super().make_output(y, inputs)
        if self.selection is not None:
            out.ids = self.selection.cols
        return out

    # -- backward -------------------------------------------------------------------------------
    def backward(self, callback: UpdateCallback) -> None:
        if self.selection is not None and self.selection.pad is not None:
            raise self.fail(
                "backward after a forward with uneven (padded) selections; inference mode "
                "is forward-only"
            )
        super().backward(callback)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        if self.selection is None:
            super()._backward(dz, callback)
            return
        x = self.inputs[0]
        dx = grad_target(x)
        w, b = self.weight, self.bias
        want_db = b is not None and not b.static
        cols = self.selection.cols
        sparse = self._sparse(cols.shape[1])
        # One compaction serves bias, weight and (dense path) input gradients; skip it when
        # nothing needs it (all static, no input gradient).
        if want_db or not w.static or (dx is not None and not sparse):
            used, dzu = _compact(dz, cols, self.out_features)
        if b is not None:
            if want_db:
                b.grad[used] += dzu.sum(axis=0)
            b.inc_update(callback)
        if dx is not None:
            if sparse:
                g = get_array_module(dz).einsum("bk,bki->bi", dz, w.value[cols])
            else:
                g = dzu @ w.value[used]
            dx += g.reshape(dx.shape)
        if not w.static:
            w.grad[used] += dzu.T @ self._flat(x)
        w.inc_update(callback)


def _compact(dz: Any, cols: Any, width: int) -> tuple[Any, Any]:
    """The columns used anywhere in the batch, and ``dz`` scattered onto them.

    Returns ``used`` (the ``u`` distinct columns, sorted; ``slice(None)`` when all ``width``
    are used, so that no copy of the weight is gathered) and ``D`` of shape ``(N, u)`` with
    ``D[b, j] = sum of dz[b, t] over t with cols[b, t] == used[j]`` (a column picked twice by
    one sample collects both). Then ``D^T x`` is the weight gradient of exactly the used rows:
    one matrix product, which beat per-entry scatter-adds (``add.at``, sorted ``reduceat``) by
    2-20x on the CPU at 1-100% selections, and is never larger than a full layer's ``dz^T x``.
    """
    xp = get_array_module(dz)
    n, k = cols.shape
    # Which columns are used and where each lands among them, in O(nnz + width): no sort.
    hit = xp.bincount(cols.reshape(-1), minlength=width) > 0
    slot = xp.cumsum(hit) - 1
    u = int(slot[-1]) + 1 if width else 0
    used = slice(None) if u == width else xp.flatnonzero(hit)
    cell = xp.repeat(xp.arange(n), k) * u + slot[cols.reshape(-1)]
    d = xp.bincount(cell, weights=dz.reshape(-1), minlength=n * u)
    return used, d.reshape(n, u).astype(dz.dtype, copy=False)
