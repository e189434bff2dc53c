"""A dense parameter's per-block optimizer counts (Adam's ``step``) in an async checkpoint, as
runs of rows: small, and independent of the block layout.

A dense parameter is cut into blocks of its *elements* (one element per row, see
:mod:`distconv.sync.ps.blocks`), so one count per row is one count per element: for a
4096 x 4096 layer, 16.8 M int64 counts, 128 MiB, more than the layer's float32 values (64 MiB)
and two thirds of them and Adam's two moments together. The counts can only change from one
block to the next, so ``KEY + RUNS`` (``step_runs_per_row``) holds them as a ``(k, 2)`` int64
array of ``[first row, count]``, one pair per run of rows of one count (neighbouring blocks of
one count are one run): ``k`` is at most the parameter's number of blocks, and a single
``[[0, count]]`` where they all agree. The key ends in :data:`~distconv.sync.base.PER_ROW`, so
a sync that keeps one count per parameter (``LocalSync``, ``MPISync``) skips it, as it skips a
sparse table's per-row counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from distconv.backend import to_host
from distconv.sync.base import PER_ROW
from distconv.sync.local import RUNS, not_counts
from distconv.sync.ps.blocks import Block, ParamSpec


def count_runs(counts: Iterable[tuple[int, int]]) -> np.ndarray:
    """The ``(k, 2)`` int64 runs ``[[first row, count], ...]`` of blocks given as
    ``(first row, count)`` pairs (in any order, together covering the parameter's rows): by
    first row, a block whose count is its predecessor's merged into that one's run."""
    runs: list[tuple[int, int]] = []
    for start, count in sorted(counts):
        if not runs or runs[-1][1] != count:
            runs.append((start, count))
    return np.array(runs, dtype=np.int64).reshape(-1, 2)


def count_of_rows(runs: Any, spec: ParamSpec, block: Block, key: str) -> int:
    """The count ``block`` takes from ``runs`` (``spec.name``'s ``key + RUNS``): that of its
    rows, or, where the checkpoint was cut into other blocks (the block's rows lie in runs of
    several counts), the largest of them, as one count per parameter gave every block.

    Raises:
        ValueError: ``runs`` is not of that form: integer ``[first row, count]`` pairs, first
            rows rising from 0 and below the parameter's rows, counts not negative.
    """
    a = np.asarray(to_host(runs))
    ok = a.ndim == 2 and a.shape[0] > 0 and a.shape[1] == 2 and a.dtype.kind in "iu"
    starts = a[:, 0] if ok else None
    if not ok or starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= spec.rows:
        raise ValueError(
            f"optimizer state {spec.name}/{key + RUNS} is {a.dtype}{list(a.shape)} "
            f"{a.ravel()[:6].tolist()}: expected integer [first row, count] pairs, first rows "
            f"rising from 0 and below the {spec.rows} rows of {spec.name}"
        )
    if np.any(a[:, 1] < 0):
        raise ValueError(f"optimizer state {spec.name}/{key + RUNS} holds a negative count")
    first = int(np.searchsorted(starts, block.start, side="right")) - 1
    last = max(int(np.searchsorted(starts, block.stop, side="left")), first + 1)
    return int(a[first:last, 1].max())


def count_problems(state: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """What ``state``'s per-row counts (``K + PER_ROW``, ``K + RUNS``) hold that is no count
    (a whole number from 0 to int64's largest), each named by parameter and key: those are
    the ones :func:`~distconv.sync.local.state_problems` skips (other syncs ignore them). Such
    a value reached ``np.unique`` or ``np.array(..., int64)`` as a bare TypeError or
    ValueError naming neither, or went to the shards as a count (-1; NaN and 2**63 as
    -2**63; 2.5 as 2).

    ``state`` is one :func:`~distconv.sync.local.state_problems` found nothing in: a scalar
    count ``K`` (Adam's ``step``) is checked there already, as a 0-d integer of the shards'
    state, and any other key there is no count."""
    return [
        f"{name}/{key}: {what}"
        for name, entry in state.items()
        for key, value in entry.items()
        if key.endswith(PER_ROW) and (what := not_counts(value)) is not None
    ]


def block_count(state: Mapping[str, Any], spec: ParamSpec, block: Block, key: str) -> Any:
    """The count ``block`` of ``spec`` takes from ``state`` (a parameter's entry) for scalar
    ``key``: its rows' count where the state has one (a dense parameter's ``key + RUNS``, also
    for one saved dense and a table now; else ``key + PER_ROW``, a sparse table's, also for a
    table saved sparse and dense now, or one count per element of a dense one, as async
    checkpoints held before their runs, a table's now too), else ``key``.

    Raises:
        ValueError: the runs are not of their form, a per-row array has another shape, or a
            sparse table's rows disagree within ``block`` (it was cut into other blocks).
    """
    if not spec.sparse and key + RUNS in state:
        return count_of_rows(state[key + RUNS], spec, block, key)
    if spec.sparse and key + RUNS in state and key + PER_ROW not in state:
        # saved dense (runs of its elements), a table now: the largest of its rows' elements
        w = spec.row_len
        elements = replace(block, start=block.start * w, stop=block.stop * w)
        return count_of_rows(state[key + RUNS], replace(spec, sparse=False), elements, key)
    per_row = state.get(key + PER_ROW)
    if per_row is None:
        return to_host(state[key])
    per_row = np.asarray(to_host(per_row))
    if not spec.sparse and len(spec.shape) > 1 and per_row.shape == (spec.shape[0],):
        # a table's, one count per row of it (``sparse_rows`` when saved, dense now): the
        # largest of the table rows this block's elements lie in
        width = spec.rows // spec.shape[0]
        return per_row[block.start // width : -(-block.stop // width)].max()
    if spec.sparse and spec.row_len > 1 and per_row.shape == (spec.rows * spec.row_len,):
        # one count per element (a dense parameter's, before runs), a table now: the largest
        # of the elements its block's table rows hold
        rows = per_row[block.start * spec.row_len : block.stop * spec.row_len]
        return rows.max()
    if per_row.shape != (spec.rows,):
        raise ValueError(
            f"optimizer state {spec.name}/{key + PER_ROW} has shape {per_row.shape}, "
            f"expected ({spec.rows},)"
        )
    counts = np.unique(per_row[block.start : block.stop])
    if len(counts) != 1 and spec.sparse:
        raise ValueError(
            f"rows {block.start}:{block.stop} of {spec.name} hold different {key!r} counts "
            f"{counts[:4].tolist()} but form one block here: resume with the block size and "
            "shard count of the run that wrote the checkpoint"
        )
    # a dense parameter's block cut across blocks of another layout: the largest, as before
    return counts[-1]
