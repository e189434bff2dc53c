"""The running metric sums of an epoch that a checkpoint carries, and how a resume takes them.

A checkpoint in the middle of an epoch holds the epoch's sums so far, summed over ranks
(:data:`SUMS`), and each rank's own loss sum (:data:`RANK_LOSS`); the chief reads them with
the checkpoint, every rank takes the chief's (:func:`share_position`), and the epoch's tally
goes on from them (:func:`epoch_sums`, :class:`~distconv.epoch_tally.EpochTally`), so a
resumed epoch's line covers the whole epoch.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types here; resume imports this module
    from distconv.resume import Position
    from distconv.sampler import GlobalBatchSampler
    from distconv.sync import SyncStrategy

#: the epoch's running metric sums a checkpoint carries (global: reduced over ranks)
SUMS = ("loss", "correct", "examples", "seconds")
#: each rank's own loss sum so far, beside SUMS where they hold the epoch's whole loss: a resume
#: on as many ranks goes on from them, adding as the run it continues did (no other rounding)
RANK_LOSS = "rank_loss"


def share_position(sync: SyncStrategy, pos: Position) -> Position:
    """Every rank's copy of the chief's position (the others contribute zeros to a sum), with
    each rank's loss sum (:data:`RANK_LOSS`) where the checkpoint has one for as many ranks."""
    world = sync.world_size
    ranks = pos.sums.get(RANK_LOSS) or []
    ranks = list(ranks) if len(ranks) == world else []  # other ranks added in another way
    fields = [pos.epoch, pos.step, pos.step_in_epoch, *(pos.sums.get(k, 0.0) for k in SUMS)]
    fields += [float(bool(ranks)), *(ranks or [0.0] * world)]
    if not sync.is_chief:
        fields = [0.0] * len(fields)
    epoch, step, in_epoch, *sums = sync.allreduce_sum(fields)
    shared = dict(zip(SUMS, sums))
    if sums[len(SUMS)]:
        shared[RANK_LOSS] = sums[len(SUMS) + 1 :]
    shared = shared if in_epoch else {}
    # the chief's schemes and world size stay (its own: the sum shares floats, not text)
    return dataclasses.replace(
        pos, epoch=int(epoch), step=int(step), step_in_epoch=int(in_epoch), sums=shared
    )


def epoch_sums(pos: Position, sampler: GlobalBatchSampler) -> dict[str, float]:
    """The epoch's metric sums to go on from: zeros, or those of the checkpoint resumed.

    A checkpoint holds global sums (and each rank's loss sum, :data:`RANK_LOSS`); this rank's
    examples before it (for its rate) follow from the batch order, so the rate covers the same
    steps as the epoch's seconds.
    """
    sums = {**{k: 0.0 for k in SUMS}, **pos.sums}
    if pos.step_in_epoch:
        done = itertools.islice(sampler.passes(pos.epoch), pos.step_in_epoch)
        sums["rank_examples"] = float(sum(len(i) for passes in done for i in passes))
    return sums
