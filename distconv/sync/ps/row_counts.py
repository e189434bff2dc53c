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

from collections.abc import Iterable
from typing import Any

import numpy as np

from distconv.backend import to_host
from distconv.sync.base import PER_ROW
from distconv.sync.ps.blocks import Block, ParamSpec

#: suffix of a dense parameter's counts as runs of rows (``step`` -> ``step_runs_per_row``)
RUNS = "_runs" + PER_ROW


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
