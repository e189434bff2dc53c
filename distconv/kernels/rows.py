"""Row scatter-adds: summing rows into a table at repeated indices, on numpy and cupy alike.

Three shapes of the same problem. :class:`RowScatter` adds rows into a target at an index that
may repeat (embedding tables, the context projection's padded table). :func:`segment_sums` sums
runs of consecutive rows, the sequences of a sequence batch (sequence pooling).
:func:`compact_columns` sums a gradient over the columns a batch selected, so that one matrix
product gives the weight gradient of exactly those rows (the selective fully connected layer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.backend import get_array_module, is_gpu_array, sum_dtype
from distconv.kernels.sequence import segment_ids


class RowScatter:
    """Adds ``rows[k]`` into ``target[index[k]]`` for every ``k``; repeated indices are summed.

    On the CPU the index is sorted once (at construction) and each run of equal indices is
    summed by ``add.reduceat``, so the final add touches every target row at most once (fast on
    every numpy, unlike ``add.at`` before 2.0); on the GPU ``add.at`` is one atomic kernel (into
    a float32 sum per distinct row when the target is a 16-bit float).

    Args:
        index: ``(M,)`` integer target rows.
        keep: optional ``(M,)`` bool mask; entries where it is False are left out.
    """

    def __init__(self, index: Any, keep: Any = None) -> None:
        xp = get_array_module(index)
        pos = xp.arange(len(index)) if keep is None else xp.flatnonzero(keep)
        self._gpu = is_gpu_array(index)
        if self._gpu:
            self._pos, self._index = pos, index[pos]
            return
        order = pos[xp.argsort(index[pos], kind="stable")]
        sorted_index = index[order]
        first = xp.ones(len(order), dtype=bool)
        first[1:] = sorted_index[1:] != sorted_index[:-1]
        self._pos = order
        self._segments = xp.flatnonzero(first)
        self._targets = sorted_index[self._segments]

    def add(self, target: Any, rows: Any) -> None:
        """``target[index[k]] += rows[k]`` for every kept ``k``.

        The rows of one index are summed in float32 when ``target`` is a 16-bit float, then
        added to ``target`` once: ``ml_dtypes`` adds bfloat16 in bfloat16 (a bfloat16 table's
        row read 4096 times in a batch got a gradient of 256, where each read added 1), and
        ``add.at`` adds float16 in float16 (stuck at 2048).
        """
        xp = get_array_module(target)
        wide = sum_dtype(target.dtype)
        picked = rows[self._pos] if wide is None else rows[self._pos].astype(wide)
        if self._gpu and wide is None:
            xp.add.at(target, self._index, picked)
        elif self._gpu:  # atomic adds into a float32 sum per distinct row, not into the table
            used, slot = xp.unique(self._index, return_inverse=True)
            sums = xp.zeros((len(used),) + picked.shape[1:], dtype=wide)
            xp.add.at(sums, slot.reshape(-1), picked)
            target[used] += sums.astype(target.dtype)
        elif len(self._pos):
            sums = xp.add.reduceat(picked, self._segments, axis=0)
            target[self._targets] += sums if wide is None else sums.astype(target.dtype)


def segment_sums(rows: Any, starts: Any, dtype: Any = None) -> Any:
    """``out[i] = rows[starts[i]:starts[i + 1]].sum(axis=0)`` for the ``n`` runs of consecutive
    rows that ``n + 1`` offsets mark; an empty run sums to 0.

    On the CPU one ``add.reduceat`` at the runs' starts, straight from ``rows``: a
    :class:`RowScatter` of each row to its run sorted the already sorted run ids and copied
    every row first, which took as long again. ``reduceat`` at two equal offsets gives the row
    there, not 0, so the starts of empty runs are left out and their rows of zeros filled in.
    On cupy a :class:`RowScatter` (one atomic-add kernel): cupy's ufuncs had no ``reduceat``
    up to v11, and recent releases have it for a few ufuncs only, untested here.

    Args:
        rows: ``(N, ...)`` values.
        starts: ``n + 1`` checked offsets (:func:`~distconv.kernels.sequence.check_offsets`),
            in ``rows``' array module.
        dtype: the type to add in and return (float32 for 16-bit rows, which numpy adds in
            their own type); ``rows``' own by default.

    Returns:
        ``(n, ...)`` sums in ``dtype``.
    """
    dtype = rows.dtype if dtype is None else np.dtype(dtype)
    shape = (len(starts) - 1, *rows.shape[1:])
    if is_gpu_array(rows):
        out = get_array_module(rows).zeros(shape, dtype=dtype)
        RowScatter(segment_ids(starts, len(rows))).add(out, rows.astype(dtype, copy=False))
        return out
    filled = starts[1:] > starts[:-1]
    if filled.all():  # the usual batch, no empty sequence: the sums are the output
        return np.add.reduceat(rows, starts[:-1], axis=0, dtype=dtype)
    out = np.zeros(shape, dtype=dtype)
    if filled.any():
        out[filled] = np.add.reduceat(rows, starts[:-1][filled], axis=0, dtype=dtype)
    return out


def compact_columns(dz: Any, cols: Any, width: int) -> tuple[Any, Any]:
    """The columns used anywhere in a batch, and ``dz`` summed onto them.

    Args:
        dz: ``(N, k)`` gradient of the selected outputs.
        cols: ``(N, k)`` column of each entry of ``dz``, in ``[0, width)``.
        width: columns in all.

    Returns:
        ``(used, D)``: ``used`` the ``u`` distinct columns, sorted (``slice(None)`` when all
        ``width`` are used, so that no copy of a weight is gathered), and ``D`` of shape
        ``(N, u)`` with ``D[b, j] = sum of dz[b, t] over t with cols[b, t] == used[j]`` (a column
        picked twice by one sample collects both). Then ``D^T x`` is the weight gradient of
        exactly the used rows: one matrix product, never larger than a full layer's ``dz^T x``,
        where per-entry scatter-adds (``add.at``, sorted ``reduceat``) are much slower on the CPU.
    """
    xp = get_array_module(dz)
    n, k = cols.shape
    if not cols.size:  # nothing selected: cupy's bincount takes the max of its input first
        none = slice(None) if not width else xp.zeros(0, dtype=xp.int64)  # as flatnonzero's
        return none, xp.zeros((n, 0), dtype=dz.dtype)
    # Which columns are used and where each lands among them, in O(nnz + width): no sort.
    hit = xp.bincount(cols.reshape(-1), minlength=width) > 0
    slot = xp.cumsum(hit) - 1
    u = int(slot[-1]) + 1 if width else 0
    used = slice(None) if u == width else xp.flatnonzero(hit)
    cell = xp.repeat(xp.arange(n), k) * u + slot[cols.reshape(-1)]
    d = xp.bincount(cell, weights=dz.reshape(-1), minlength=n * u)
    return used, d.reshape(n, u).astype(dz.dtype, copy=False)
