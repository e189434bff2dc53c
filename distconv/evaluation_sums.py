"""A test set's sums over ranks (:func:`evaluate_shares`), and a batch's right answers
(:func:`right_answers`), as the Trainer scores them in and after its epochs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import to_host
from distconv.data import DataError, fingerprint
from distconv.layers.base import forward_only
from distconv.network import NetworkError
from distconv.sampler import stride_shard
from distconv.sequence_set import count_of, set_length
from distconv.sync import SyncStrategy
from distconv.sync.collective_time import timed_collective
from distconv.sync.description import digest


def evaluate_shares(
    forward: Callable[[Any, np.ndarray], tuple[Any, Any]],
    arrays: Any,
    sync: SyncStrategy,
    batch_size: int,
    accuracy: bool,
    dtype: Any = None,
) -> dict[str, float]:
    """Mean test loss (and accuracy) over ``arrays``, which hold at least one example: each
    rank runs ``forward(arrays, rows)`` (summed loss, right answers) on its stride share,
    ``batch_size`` rows at a time, and the ranks sum. ``dtype``: the one the inputs are cast
    to (the trainer's), as fit's job check compares the sets. A
    :class:`~distconv.sequence_set.SequenceSet` is shared by its sequences, and its means are
    over the rows its loss averages (:func:`~distconv.sequence_set.count_of`: the tokens under
    a per-token loss); a batch of no such row (empty sentences) is not forwarded.

    The means are over the examples the ranks summed: a rank an asynchronous parameter server
    lost (``--on-worker-loss continue``) adds nothing to the sum, and dividing by the whole
    set counted its share as wrong answers of no loss.

    Raises:
        DataError: the ranks were handed different sets (its own shard each, as Horovod
            scripts do): each would have summed its stride share of its own set, a mean over
            neither (half the examples of two equal shards), without a word. Every rank sees
            it in the same sum and raises alike, so none waits for another.
    """
    rank = sync.rank
    mine = stride_shard(set_length(arrays), rank, sync.world_size)
    loss_sum, correct, counted = 0.0, 0.0, 0
    with forward_only():  # no backward follows: layers keep nothing for one
        for start in range(0, len(mine), batch_size):
            index = mine[start : start + batch_size]
            if not (count := count_of(arrays, index)):  # an empty batch has no mean loss
                continue
            loss, right = forward(arrays, index)
            loss_sum += float(to_host(loss))
            correct += float(to_host(right))
            counted += count
    # the marks of the sets in the one sum, in values of a fixed count: one place per rank made
    # the reply of a parameter server's gather grow as the square of the world (over its 1 MiB
    # header cap from 340 workers) for a check that is nearly always passed
    pieces = _set_mark(arrays, dtype)
    first = [1, *pieces] if rank == 0 else [0] * (1 + MARK_PIECES)
    squares = [p * p for p in pieces]
    shares = [loss_sum, correct, counted, 1, *pieces, *squares, *first]
    sums = timed_collective(sync, sync.allreduce_sum, shares)
    loss_sum, correct, n = sums[:3]
    _refuse_other_sets(rank, pieces, [int(v) for v in sums[3:]])
    result = {"test_loss": loss_sum / n}
    if accuracy:
        result["test_acc"] = correct / n
    return result


#: a set's mark is this many 16-bit pieces (48 bits): each piece and its square, summed over up
#: to 2**20 ranks, are whole numbers below 2**53, which float64 sums exactly in any order
MARK_PIECES = 3


def _set_mark(arrays: Any, dtype: Any) -> list[int]:
    """A set's :func:`~distconv.data.fingerprint` (its length, feeds and sampled examples cast
    to ``dtype``, as the job check compares them) as :data:`MARK_PIECES` 16-bit numbers."""
    whole = int(digest(fingerprint(arrays, dtype))[: 4 * MARK_PIECES], 16)
    return [(whole >> (16 * i)) & 0xFFFF for i in range(MARK_PIECES)]


def _refuse_other_sets(rank: int, mine: list[int], sums: list[int]) -> None:
    """Raise unless every rank in ``sums`` (ranks summed, then the marks' pieces, their squares,
    and rank 0's presence and pieces) marked its set as ``mine``. ``k`` numbers are all equal
    exactly where ``k`` times the sum of their squares is their sum squared (Cauchy-Schwarz),
    so every rank decides alike from the same sums; a rank a parameter server lost is in none.

    Raises:
        DataError: naming rank 0 where this rank's set is not rank 0's."""
    ranks, p = sums[0], MARK_PIECES
    total, squares, first = sums[1 : 1 + p], sums[1 + p : 1 + 2 * p], sums[1 + 2 * p :]
    if all(ranks * q == t * t for t, q in zip(total, squares)):
        return
    other = "rank 0" if rank != 0 and first[0] == 1 and first[1:] != mine else "another rank"
    raise DataError(
        f"rank {rank} and {other} evaluate different sets (another length, or other "
        "examples): hand every rank the whole set, it takes its stride share itself"
    )


def right_answers(outputs: dict[str, Arg], accuracy: tuple[str, str]) -> Any:
    """How many rows' argmax of ``outputs[accuracy[0]]`` equal the class ids in
    ``outputs[accuracy[1]]`` (ids, or values of one id per row, flat or in a column).

    Raises:
        NetworkError: the predictions are not scores of shape ``(N, classes, ...)`` (a loss's
            value, ids alone), or the labels are not one per prediction row (one-hot labels,
            say): numpy would broadcast them, wrongly, when the batch size equals the number
            of classes.
    """
    predictions, labels = (outputs[n] for n in accuracy)
    truth = labels.ids if labels.ids is not None else labels.value
    scores = predictions.value
    if scores is None or scores.ndim < 2:  # a loss, ids: numpy's AxisError named neither
        got = "ids alone" if scores is None else f"shape {tuple(scores.shape)}"
        raise NetworkError(
            f"accuracy={tuple(accuracy)}: {accuracy[0]!r} gives {got}; accuracy wants its "
            "scores, one row of classes per example (the layer before the loss)"
        )
    answers = scores.argmax(axis=1)
    if truth.size != answers.size:
        raise NetworkError(
            f"accuracy={tuple(accuracy)}: labels of shape {tuple(truth.shape)} for predictions of "
            f"shape {tuple(predictions.value.shape)}; accuracy wants one class id per row"
        )
    if truth.shape != answers.shape:
        truth = truth.reshape(answers.shape)  # (N, 1) against (N,) broadcast to N x N
    return (answers == truth).sum()
