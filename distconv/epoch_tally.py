"""One epoch's metrics: this rank's sums kept on the device, summed over ranks at each check.

Reading a loss every step would stall a GPU, so a :class:`EpochTally` adds this rank's loss,
right answers and examples as device arrays and reads them only when the trainer folds them
into the global sums: at a checkpoint, at a stop, and at the epoch's end. A fold is also where a
diverged loss is caught, naming the steps since the last fold. The test set's sums and a
batch's right answers are :mod:`distconv.evaluation_sums`'.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from distconv.backend import to_host, widened
from distconv.epoch_sums import PUSH_COUNTS, RANK_LOSS, RANK_WAITS, epoch_sums
from distconv.resume import Position
from distconv.sampler import GlobalBatchSampler
from distconv.scheme_history import EARLIER, resumed_under
from distconv.step_guard import TrainingError
from distconv.sync import SyncStrategy
from distconv.sync.collective_time import collective_seconds, timed_collective
from distconv.sync.description import sync_scheme

#: the fields of an epoch's record that two runs of one job need not repeat: timings, and an
#: asynchronous run's push counts, which its workers' timing decides; a resumed run writes an
#: uninterrupted one's lines but for these (:meth:`EpochTally.record`)
UNREPEATED = (
    "seconds",
    "examples_per_second",
    "examples_per_second_per_rank",
    "collective_seconds",
    "collective_seconds_per_rank",
    "sync_seconds_per_rank",
    *PUSH_COUNTS,
)


class EpochTally:
    """The metric sums of one epoch, from its first step or from the checkpoint resumed.

    Args:
        sync: sums over ranks (``allreduce_sum``), and this rank's place for its rate.
        pos: where the epoch starts (a resumed position carries the global sums so far).
        sampler: the batch order, for this rank's examples before a resumed position.
        first: whether this is the first epoch its fit trains (a start's or a resume's): its
            record has ``scheme`` (:meth:`record`); a resume's warns where its checkpoint was
            written under another scheme (:func:`~distconv.scheme_history.resumed_under`).
        count: a pass's examples from its index array, as the steps count them (a sequence
            set's rows: :func:`~distconv.sequence_set.count_of`), for a resumed epoch's rate.

    Attributes:
        scheme: the sync's scheme (:func:`~distconv.sync.description.sync_scheme`), read here
            once an epoch, before its first step (an error in a strategy's ``describe()`` is
            raised here), for its record and each of its checkpoints.
    """

    def __init__(
        self,
        sync: SyncStrategy,
        pos: Position,
        sampler: GlobalBatchSampler,
        first: bool = False,
        count: Callable[[Any], int] = len,
    ) -> None:
        self.sync, self.first = sync, first
        # the epoch's scheme (its checkpoints record it), read once, before its first step: a
        # bug in a describe() of one's own is raised here, not after a whole epoch (the sync's
        # settings are known since setup; a resume under another scheme sets up anew)
        self.scheme = sync_scheme(sync)
        # a resume's first epoch: the schemes of its steps before this sync's (a warning if the
        # checkpoint's was another), for its record
        self.earlier = (
            resumed_under(pos, self.scheme, sync.world_size) if first and pos.schemes else []
        )
        self.sums = epoch_sums(pos, sampler, count)
        # the sums the epoch started from; this rank's additions since run on past every fold,
        # so that where the folds fall (checkpoints, a stop) changes no rounding of the loss
        self._start = dict(self.sums)
        self.loss: Any = 0
        carried = self._start.pop(RANK_LOSS, None)
        # this rank's own sum so far: adding on to it repeats the additions of the run resumed
        if carried is not None:
            self.loss, self._start["loss"] = carried[sync.rank], 0.0
        # whether the ranks' sums hold the epoch's whole loss (not beside an older checkpoint's)
        self._whole = carried is not None or not self._start["loss"]
        # each rank's loss sum as last folded: one a parameter server lost sums nothing later
        self._ranks = list(carried) if carried is not None else [0.0] * sync.world_size
        # each rank's waits before the resume (a checkpoint of this epoch's), and as last folded
        waited = self._start.pop(RANK_WAITS, None)
        self._waits = list(waited) if waited is not None else [0.0] * sync.world_size
        self.correct: Any = 0
        self.seen = 0
        # an asynchronous run's: this rank's push counts (traffic()) at the epoch's start, its
        # pushes since summed at each fold as its right answers and examples are; else None
        self._pushes_from = self._push_counts() if self.scheme.get("mode") == "async" else None
        # this rank's right answers, examples (and pushes) at the last fold
        self._folded = (0.0,) * (2 + len(self._pushes_from or ()))
        self.since_step = pos.step
        self.started = time.perf_counter()
        # this rank's waits in the Trainer's collectives so far: the epoch's are those since,
        # after those of its steps before a resume (the checkpoint's)
        self._waited = collective_seconds(sync) - self._waits[sync.rank]
        # this rank's waits in its steps' exchanges so far (None: a sync that keeps none)
        self._exchanged = step_exchange_seconds(sync)

    def _push_counts(self) -> list[float]:
        """This rank's :data:`PUSH_COUNTS` so far, as its sync's ``traffic()`` keeps them."""
        totals = self.sync.traffic()
        return [float(totals.get(k, 0)) for k in PUSH_COUNTS]

    def add(self, loss: Any, correct: Any, examples: int) -> None:
        """Add one step's summed loss and right answers (device scalars) and its examples.

        A 16-bit loss (float16, bfloat16) is added in float32: an epoch's sum in float16
        overflows past 65504 (a spurious "NaN or infinite" at the fold), one in bfloat16 stops
        growing once a step's loss is below half its spacing."""
        self.loss, self.correct = self.loss + widened(loss), self.correct + correct
        self.seen += examples

    def fold(self, pos: Position) -> dict[str, float]:
        """Sum every rank's additions into the global sums (a collective: every rank calls it at
        the same step); returns the sums, with each rank's own loss sum (:data:`RANK_LOSS`).
        The additions go on, and a resume on as many ranks goes on from each rank's sum, so an
        epoch's loss is the same wherever checkpoints, or a stop and a resume, cut it.

        Raises:
            TrainingError: the loss summed over ranks is NaN or infinite.
        """
        world, rank = self.sync.world_size, self.sync.rank
        mine, here, waits = [0.0] * world, [0.0] * world, [0.0] * world
        mine[rank], here[rank] = float(to_host(self.loss)), 1.0
        waits[rank] = collective_seconds(self.sync) - self._waited
        counts = (float(to_host(self.correct)), float(self.seen))
        if self._pushes_from is not None:
            since = zip(self._push_counts(), self._pushes_from)
            counts += tuple(total - start for total, start in since)
        # right answers, examples (and pushes) fold as the part since the last fold (integers:
        # any order of additions is exact); the loss as each rank's own running sum, added in
        # rank order, so the folds' places change no rounding. A rank an asynchronous
        # parameter server lost (--on-worker-loss continue) sums nothing: its loss folded
        # before stays, as its examples and right answers do
        new = [now - before for now, before in zip(counts, self._folded)]
        summing = [*new, *mine, *here, *waits]
        right, examples, *summed = timed_collective(self.sync, self.sync.allreduce_sum, summing)
        pushed, summed = summed[: len(new) - 2], summed[len(new) - 2 :]
        self._folded = counts
        ranks = [v if h else old for v, h, old in zip(summed, summed[world:], self._ranks)]
        self._ranks, loss = ranks, sum(ranks)
        kept = zip(summed[2 * world :], summed[world:], self._waits)
        self._waits = [v if h else old for v, h, old in kept]
        if not np.isfinite(loss):
            raise TrainingError(
                f"the loss became NaN or infinite in epoch {pos.epoch + 1}, "
                f"{steps_text(self.since_step + 1, pos.step)}; {DIVERGED_WAY_OUT}"
                + _float16_sums(self.sync)
            )
        sums = dict(self._start)
        sums["loss"] += loss
        sums["correct"] = self.sums["correct"] + right
        sums["examples"] = self.sums["examples"] + examples
        sums["seconds"] += time.perf_counter() - self.started
        sums["rank_examples"] = sums.get("rank_examples", 0.0) + self.seen
        for key, n in zip(PUSH_COUNTS, pushed):
            sums[key] = self.sums.get(key, 0.0) + n
        if self._whole:
            sums[RANK_LOSS] = ranks
        sums[RANK_WAITS] = self._waits  # a checkpoint's: a resume adds on to them
        self.sums = sums
        self.since_step = pos.step
        return sums

    def record(self, pos: Position, global_batch: int, accuracy: bool) -> dict[str, Any]:
        """The epoch's record from the folded sums (a collective: it gathers every rank's rate).

        Args:
            pos: the position after the epoch (``epoch`` counts it).
            global_batch: examples per step over all ranks.
            accuracy: whether the record has ``train_acc``.

        The record of a fit's first epoch (``first``) also has ``scheme``, the sync's settings
        (:func:`~distconv.sync.description.sync_scheme`): runs of several schemes side by side
        are told apart by their metrics, not by their logs. Each start and each resume has the
        scheme it runs under, which may be another than the run resumed (MPI, then local);
        its metrics line leaves out one the lines before already say (:meth:`metrics_line`).
        A resume in the middle of the epoch under another scheme than its earlier steps' also
        has :data:`~distconv.scheme_history.EARLIER`: those steps' schemes, each with its last
        step (``scheme`` is then the one of the epoch's last steps, and of the lines after).
        The chief's record alone has it: the chief alone reads the checkpoint (its position's
        ``schemes``) and writes metrics.jsonl; another rank's record of that epoch lacks it
        (the sync contract shares floats, ``allreduce_sum``, not text).

        ``collective_seconds_per_rank`` is the time each rank waited in the Trainer's
        collectives over the epoch's steps (its stop checks, metric sums and checkpoint
        barriers, within ``seconds``: :mod:`distconv.sync.collective_time`; in a resumed
        epoch those its checkpoint carried, :data:`~distconv.epoch_sums.RANK_WAITS`, and those
        since); ``collective_seconds`` the most of them. A fast rank waits there
        for a slow one where the steps do not make it wait (asynchronous training). A rank
        absent from the rates' sum (one a parameter server lost, ``--on-worker-loss
        continue``) is None (JSON null) in the per-rank lists: not measured, where 0.0 read
        as a rank that never waits.

        ``sync_seconds_per_rank`` is the time each rank's steps waited in their own exchange
        (``traffic()``'s ``sync_seconds``: the sync keeps the sum, nothing is timed per step
        here), where a fast rank waits for a slow one in a synchronous or allreduce run; the
        rank with the least of both waits is the one the others waited for. A resumed epoch's
        counts its steps since the resume (no checkpoint carries it). A sync that keeps no
        ``sync_seconds`` (a rank alone) has no such field.

        An asynchronous run's record also has :data:`PUSH_COUNTS`: the push messages of the
        epoch's steps the shards applied (at least one parameter of each: the updates made)
        and dropped whole as too stale, summed over ranks (in a resumed epoch those its
        checkpoint carried and those since), as has an epoch resumed in its middle under
        another mode whose earlier steps were asynchronous (the counts of those steps, which
        its checkpoint carried); another run's has neither (no push is dropped, each step is
        one update).
        """
        sums, world, rank = self.sums, self.sync.world_size, self.sync.rank
        examples, seconds = max(sums["examples"], 1), max(sums["seconds"], 1e-9)
        rates, waits, exchanges, here = ([0.0] * world for _ in range(4))
        rates[rank] = sums.get("rank_examples", 0.0) / seconds
        waits[rank], here[rank] = collective_seconds(self.sync) - self._waited, 1.0
        exchanged = step_exchange_seconds(self.sync)
        if exchanged is not None and self._exchanged is not None:
            exchanges[rank] = exchanged - self._exchanged
        record: dict[str, Any] = {
            "epoch": pos.epoch,
            "step": pos.step,
            "train_loss": sums["loss"] / examples,
        }
        if accuracy:
            record["train_acc"] = sums["correct"] / examples
        record["seconds"] = sums["seconds"]
        record["examples_per_second"] = sums["examples"] / seconds
        summing = [*rates, *waits, *exchanges, *here]
        shared = timed_collective(self.sync, self.sync.allreduce_sum, summing)
        # a rank a parameter server lost (--on-worker-loss continue) summed nothing: None, not
        # measured (a 0.0 wait read as a rank that never waits, a straggler's look)
        present = shared[3 * world :]
        rates, waits, exchanges = (
            [v if h else None for v, h in zip(shared[i:], present)] for i in (0, world, 2 * world)
        )
        record["examples_per_second_per_rank"] = rates
        # where the epoch's time went beside the steps: each rank's waits for the others
        record["collective_seconds"] = max(w for w in waits if w is not None)
        record["collective_seconds_per_rank"] = waits
        # where a sync or allreduce run's fast ranks wait for a slow one: in each step's exchange
        if self._exchanged is not None:
            record["sync_seconds_per_rank"] = exchanges
        # what asynchronous SGD did: updates, drops; also in an epoch resumed under another
        # mode whose earlier steps were async (its checkpoint carried their counts)
        if self._pushes_from is not None or any(k in sums for k in PUSH_COUNTS):
            record |= {k: int(sums.get(k, 0.0)) for k in PUSH_COUNTS}
        record = {**record, "global_batch": global_batch, "world_size": world}
        if self.first:  # where this fit's lines start: which scheme computed them
            record["scheme"] = self.scheme
        if self.earlier:  # resumed in the middle of it under another scheme than its start's
            record[EARLIER] = self.earlier
        return record

    @staticmethod
    def metrics_line(record: Mapping[str, Any], lines: Sequence[Mapping[str, Any]]) -> dict:
        """``record`` as the metrics line that follows ``lines`` (the run's so far): without
        its ``scheme`` where that is the one in force (:func:`scheme_in_force`), so a resume
        under the run's own scheme writes the lines an uninterrupted run writes, and one under
        another scheme (an MPI run resumed locally) says its own, which its lines ran under. A
        line with earlier schemes (a switch mid-epoch) keeps its ``scheme``, to be read whole."""
        line = dict(record)
        if "scheme" in line and EARLIER not in line and line["scheme"] == scheme_in_force(lines):
            del line["scheme"]
        return line


def step_exchange_seconds(sync: SyncStrategy) -> float | None:
    """The time ``sync``'s steps waited in their exchange so far (``traffic()``'s running
    ``sync_seconds``, which the sync keeps: nothing is timed here), or None where it keeps
    none (a rank alone, a strategy of one's own without it, a stand-in for one with the
    collectives alone, as :func:`~distconv.sync.collective_time.collective_seconds` reads)."""
    traffic = getattr(sync, "traffic", None)
    seconds = traffic().get("sync_seconds") if traffic is not None else None
    return None if seconds is None else float(seconds)


def scheme_in_force(lines: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The scheme the last of a run's metrics ``lines`` was computed under: the ``scheme`` of
    the last line that has one (None where none has: a log written before schemes were).
    A reader takes a line's scheme so: ``scheme_in_force(lines[: i + 1])``."""
    return next((r["scheme"] for r in reversed(lines) if "scheme" in r), None)


#: what a run whose loss went NaN does next: a resume is refused (another --lr is another run,
#: whose checkpoints would not reproduce), and the newest checkpoint may already hold weights
#: that are finite but diverged, so an earlier one's weights, or a fresh start
DIVERGED_WAY_OUT = (
    "lower the learning rate or check the data: start a new run from an earlier checkpoint's "
    "weights with a lower --lr (--init-from PATH --out NEW), or start afresh (the last "
    "checkpoint kept before this may already hold diverged weights, finite but far too large)"
)


def steps_text(first: int, last: int) -> str:
    """``at step 3`` where the loss check covered one step, else ``between steps 3 and 5``."""
    return f"at step {last}" if first == last else f"between steps {first} and {last}"


def _float16_sums(sync: SyncStrategy) -> str:
    """The other way out of a loss gone NaN where the parameters are float16: their gradients
    hold the sum over a rank's examples of a step, past 65504 though every mean fits."""
    if not any(p.value.dtype == np.float16 for p in getattr(sync, "params", ())):
        return ""
    return (
        "; or, the parameters being float16, whose gradients hold the sum over a rank's "
        "examples of a step (batch size times accumulate, times the mean) and overflow past "
        "65504 (float16's range), lower --batch-size / --accumulate or train in bfloat16 or "
        "float32"
    )
