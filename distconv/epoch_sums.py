"""The running metric sums of an epoch that a checkpoint carries, and how a resume takes them.

A checkpoint in the middle of an epoch holds the epoch's sums so far, summed over ranks
(:data:`SUMS`, an asynchronous run's :data:`PUSH_COUNTS`), and each rank's own loss sum
(:data:`RANK_LOSS`) and waits in collectives (:data:`RANK_WAITS`); the chief reads them with
the checkpoint, every rank takes the chief's (:func:`share_position`), and the epoch's tally
goes on from them (:func:`epoch_sums`, :class:`~distconv.epoch_tally.EpochTally`), so a
resumed epoch's line covers the whole epoch.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types here; resume imports this module
    from distconv.resume import Position
    from distconv.sampler import GlobalBatchSampler
    from distconv.sync import SyncStrategy

#: the epoch's running metric sums a checkpoint carries (global: reduced over ranks)
SUMS = ("loss", "correct", "examples", "seconds")
#: an asynchronous run's push messages the shards applied and dropped in the epoch, summed over
#: ranks (the workers' ``traffic()`` counts, as the shards' stats count them); a checkpoint of
#: such a run carries them beside SUMS (integers: exact in any order of additions)
PUSH_COUNTS = ("push_messages_applied", "push_messages_dropped")
#: each rank's own loss sum so far, beside SUMS where they hold the epoch's whole loss: a resume
#: on as many ranks goes on from them, adding as the run it continues did (no other rounding)
RANK_LOSS = "rank_loss"
#: each rank's waits in the Trainer's collectives in the epoch so far (its
#: ``collective_seconds``, as each fold reads them): a resume on as many ranks adds on to them
RANK_WAITS = "rank_collective_seconds"
#: what a checkpoint's ``sums`` may hold, each where the epoch's sums have it
CARRIED = (*SUMS, *PUSH_COUNTS, RANK_LOSS, RANK_WAITS)


def share_position(sync: SyncStrategy, pos: Position) -> Position:
    """Every rank's copy of the chief's position (the others contribute zeros to a sum), with
    the push counts (:data:`PUSH_COUNTS`) where the checkpoint has them, and each rank's loss
    sum (:data:`RANK_LOSS`) and waits (:data:`RANK_WAITS`) where it has them for as many
    ranks. A checkpoint without one (of an older distconv, or of another world size) resumes
    its epoch counting that from the resume."""
    world, n = sync.world_size, len(PUSH_COUNTS)
    pushes = [pos.sums[k] for k in PUSH_COUNTS if k in pos.sums]
    carried = [pushes if len(pushes) == n else []]
    carried += [_of_ranks(pos.sums.get(key), world) for key in (RANK_LOSS, RANK_WAITS)]
    fields = [pos.epoch, pos.step, pos.step_in_epoch, *(pos.sums.get(k, 0.0) for k in SUMS)]
    for values, length in zip(carried, (n, world, world)):
        fields += [float(bool(values)), *(values or [0.0] * length)]
    if not sync.is_chief:
        fields = [0.0] * len(fields)
    epoch, step, in_epoch, *sums = sync.allreduce_sum(fields)
    shared, rest = dict(zip(SUMS, sums)), sums[len(SUMS) :]
    for key, length in zip((PUSH_COUNTS, RANK_LOSS, RANK_WAITS), (n, world, world)):
        had, values, rest = rest[0], rest[1 : 1 + length], rest[1 + length :]
        if had:
            shared |= dict(zip(key, values)) if key is PUSH_COUNTS else {key: values}
    shared = shared if in_epoch else {}
    # the chief's schemes and world size stay (its own: the sum shares floats, not text)
    return dataclasses.replace(
        pos, epoch=int(epoch), step=int(step), step_in_epoch=int(in_epoch), sums=shared
    )


def _of_ranks(values: list[float] | None, world: int) -> list[float]:
    """A checkpoint's per-rank ``values``, or none where they are of another number of ranks
    (added in another way) or absent."""
    return list(values) if values and len(values) == world else []


def epoch_sums(
    pos: Position, sampler: GlobalBatchSampler, count: Callable[[Any], int] = len
) -> dict[str, float]:
    """The epoch's metric sums to go on from: zeros, or those of the checkpoint resumed.

    A checkpoint holds global sums (and each rank's loss sum, :data:`RANK_LOSS`); this rank's
    examples before it (for its rate) follow from the batch order, so the rate covers the same
    steps as the epoch's seconds. ``count`` gives a pass's examples from its index array (a
    sequence set's: the rows its loss averages, as its steps counted them).
    """
    sums = {**{k: 0.0 for k in SUMS}, **pos.sums}
    if pos.step_in_epoch:
        done = itertools.islice(sampler.passes(pos.epoch), pos.step_in_epoch)
        sums["rank_examples"] = float(sum(count(i) for passes in done for i in passes))
    return sums
