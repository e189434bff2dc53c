"""A sync step's arithmetic on a shard's gradients: the ranks' sum of a block in rank order,
the message of the NaN/Inf check (:func:`distconv.backend.all_finite`), and which rows a sparse
step's replies carry, with the size check of the largest (the chief's)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distconv.backend import all_finite
from distconv.sync.ps.blocks import ParamSpec, rows_bytes
from distconv.sync.ps.config import ShardConfig

#: how a sync step's non-finite sum begins: the job's update diverged, whichever rank's part
#: held the NaN or Inf (every rank computed its part from the same weights, and an attempt
#: resumed from a checkpoint meets it again at the same step; the launcher reads these words)
DIVERGED = "the update diverged"


def nan_message(name: str, rank: int) -> str:
    """The error for a gradient of parameter ``name`` whose part from ``rank`` holds NaN/Inf
    (an asynchronous push, checked alone: the rank is proven)."""
    return f"gradient of parameter {name} from rank {rank} is not finite (NaN/Inf)"


def diverged_message(name: str, found: str, step: int | None = None) -> str:
    """``the update diverged at step 3 (a non-finite gradient of conv2.weight: rank 1's part is
    not finite ...)``: a sync step's sum of parameter ``name`` that is not finite, ``found``
    saying what the check could prove of the ranks' parts, ``step`` where known."""
    at = "" if step is None else f" at step {step}"
    return f"{DIVERGED}{at} (a non-finite gradient of {name}: {found})"


def not_finite_parts(ranks: Sequence[int]) -> str:
    """``rank 1's part is not finite``, ``the parts of ranks 0 and 1 are not finite``."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}'s part is not finite"
    listed = ", ".join(str(r) for r in ranks[:-1]) + f" and {ranks[-1]}"
    return f"the parts of ranks {listed} are not finite"


def sum_culprit(
    name: str, ranks: Sequence[int], parts: Sequence[np.ndarray], total, step: int | None = None
) -> str:
    """The error for one block of parameter ``name`` whose ranks' sum ``total`` (of ``parts``,
    the ranks' gradients in rank order, by :func:`sum_in_rank_order`) is not finite, at sync
    step ``step`` where given: the job's update diverged (:func:`diverged_message`), a rank
    named only where its part is proven to hold a NaN or Inf.

    - Every part still intact (one rank, sparse rows, a copied first frame) is checked again:
      each that fails is named; if none fails, the ranks' finite parts overflowed when added.
    - A dense sum runs in the first rank's received frame, so that part is gone. The others
      are checked again, and each that fails is named, with the first rank's part said to be
      unchecked (it may hold one too: that cannot be known now). If all of them are finite, a
      NaN in the sum proves that the first rank's part held a NaN at that element: the sum
      adds each element in rank order, and adding a finite number to a finite one gives a
      finite number or, on overflow, an infinity, and adding it to an infinity gives that
      infinity, never a NaN (Inf + -Inf needs two infinities, and only the running sum can
      be one). Without a NaN in the sum, the first rank's part holds Inf, or the ranks' finite
      parts overflowed when added: the sum cannot tell which.
    """
    summed_into = len(parts) > 1 and total is parts[0]
    checked = zip(ranks[1:], parts[1:]) if summed_into else zip(ranks, parts)
    bad = [r for r, g in checked if not all_finite(g)]
    if bad:
        found = not_finite_parts(bad)
        if summed_into:
            found += f"; rank {ranks[0]}'s part, summed into, could not be checked"
    elif not summed_into:
        found = "the ranks' finite parts overflowed when added"
    elif np.isnan(total).any():
        found = f"rank {ranks[0]}'s part holds a NaN"
    else:
        found = f"rank {ranks[0]}'s part holds Inf, or the ranks' finite parts overflowed"
    return diverged_message(name, found, step)


def sum_in_rank_order(parts: Sequence[tuple[np.ndarray | None, np.ndarray]]):
    """Sum the ranks' gradients of one block in rank order.

    Returns ``(row ids or None, gradient sum)``. Dense parts add up whole; sparse parts add up
    over the union of their rows (``np.add.at`` visits the concatenation in order, so every
    row's sum runs in rank order too). Two runs add in the same order, bit for bit. The mean
    is not taken here: the optimizer folds ``1 / examples`` into its own arithmetic
    (``grad_scale``, as a single process does), which saves a pass over the gradient.

    The sum runs in place in the first rank's received frame when it is writable (its message
    is not used again), so a dense block takes no copy: with one rank the sum is that frame
    itself (the optimizer only reads it).
    """
    first = parts[0][1]
    if parts[0][0] is None:
        grad = first if first.flags.writeable or len(parts) == 1 else np.array(first)
        for _, g in parts[1:]:
            np.add(grad, g, out=grad)
        rows = None
    elif len(parts) == 1:  # one rank's rows are already unique and increasing
        rows, grad = parts[0]
    else:
        ids = np.concatenate([rows for rows, _ in parts])
        rows, where = np.unique(ids, return_inverse=True)
        grad = np.zeros((len(rows), first.shape[1]), dtype=first.dtype)
        np.add.at(grad, where, np.concatenate([g for _, g in parts]))
    return rows, grad


#: the rank whose sparse replies carry every rank's rows: the chief, which writes checkpoints
CHIEF = 0


def carries_union(rank: int) -> bool:
    """Whether a sync sparse push's reply to ``rank`` carries every rank's rows, not only its
    own (see :func:`reply_rows`): the shard's rule, by which a worker knows whether its
    refresh must pull its sparse tables (:mod:`.pulls`)."""
    return rank == CHIEF


def reply_rows(
    rank: int,
    sums: Sequence[tuple[np.ndarray | None, Any]],
    pushed: Sequence[tuple[np.ndarray | None, Any]],
) -> list[np.ndarray | None]:
    """The row ids, per block, that a sync sparse push's reply to ``rank`` carries.

    The chief's reply carries the union of every rank's rows (``sums``, per block, from
    :func:`sum_in_rank_order`): its copy of the table stays the shards' in every row, since its
    checkpoints write that copy (a sync checkpoint gathers only optimizer state). Any other
    rank gets back only the rows it pushed (``pushed``: its ``(row ids, gradient)`` per block):
    a worker prefetches the rows of each forward before it runs, so the other ranks' rows
    would be a download it never reads, growing with the number of workers; it pulls its
    tables whole at a refresh (an epoch's end, a stop) instead.
    """
    return [rows for rows, _ in (sums if carries_union(rank) else pushed)]


def over_cap(
    spec: ParamSpec,
    step: int,
    sums: Sequence[tuple[np.ndarray | None, Any]],
    config: ShardConfig,
) -> str | None:
    """The error for a sync step of sparse parameter ``spec`` whose reply to the chief would
    pass the shard's ``max_message_bytes`` (``config``), or None: that reply carries the union
    of the ranks' rows (``sums``, per block; :func:`reply_rows`), an id and a row each, so N
    pushes within the cap may make a larger reply, which the chief would refuse as malformed
    once the step had been applied. Checked before any update, so none is applied. (Another
    rank's reply holds the bytes of its own push, which that rank checked against the cap.)"""
    if not sums or sums[0][0] is None:  # dense: the reply is as large as each push
        return None
    size = sum(rows_bytes(len(rows), spec.row_bytes) for rows, _ in sums)
    if size <= config.max_message_bytes:
        return None
    return (
        f"sync step {step} of sparse parameter {spec.name}: the ranks' rows together make a "
        f"reply of {size} bytes to rank {CHIEF} (the chief, whose reply carries them all), "
        f"over the shard's max_message_bytes {config.max_message_bytes}: raise "
        "--max-message-bytes, or use more shards"
    )
