"""One epoch of :meth:`~distconv.trainer.Trainer.fit`: its steps, the checkpoints due within it
and a stop agreed between them, then its record (and the test set's metrics).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distconv.epoch_tally import EpochTally
from distconv.held_updates import counting_step
from distconv.launch_env import keep_lines_in_log
from distconv.metrics import ProgressBar
from distconv.notes import add_note
from distconv.resume import Position, Preempted
from distconv.sampler import GlobalBatchSampler
from distconv.sequence_set import count_of, empty_steps
from distconv.stop_agreement import AgreedStop, stop_agreed
from distconv.stop_request import EXIT_STATUS
from distconv.sync.base import SyncStrategy

if TYPE_CHECKING:
    from distconv.trainer import Trainer


def run_epoch(
    trainer: Trainer, train: Any, test: Any, sampler: GlobalBatchSampler, ends_fit: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train ``trainer`` one epoch on ``train`` (evaluating ``test`` after it, where given);
    returns its record and the scheme it ran under (read once). ``ends_fit``: the fit's last
    epoch, whose last step the ranks check for a stop at too.

    Raises:
        Preempted: a stop (SIGTERM, Ctrl-C) agreed between steps; checkpointed first.
        TrainingError: the loss became NaN or infinite (found at a fold).
    """
    t, sync = trainer, trainer.sync
    sync.set_lr_scale(t.lr_decay**t.pos.epoch)
    count = functools.partial(count_of, train)  # a resumed epoch's steps before, for its rate
    tally = EpochTally(sync, t.pos, sampler, first=not t.history, count=count)
    bar = ProgressBar(
        sampler.steps_per_epoch - t.pos.step_in_epoch,
        f"epoch {t.pos.epoch + 1}",
        enabled=t.progress if sync.is_chief else False,
    )
    # steps whose sequences hold no row on any rank: skipped alike, updating nothing
    skipped = empty_steps(train, sampler, t.pos.epoch)
    with bar, sums_kept_at_an_error(t, tally):
        for passes in sampler.passes(t.pos.epoch, t.pos.step_in_epoch):
            with counting_step():  # a second Ctrl-C held over a step's updates: raised once
                if skipped is not None and skipped[t.pos.step_in_epoch]:  # it is counted
                    t.pos.step += 1  # no mean loss, no gradient: weights and optimizer stay
                else:
                    tally.add(*t.train_step(train, passes))
                t.pos.step_in_epoch += 1
            if bar.enabled:
                bar.update()
            last = ends_fit and t.pos.step_in_epoch == sampler.steps_per_epoch
            stop = stop_agreed(sync, t._stop, t.pos.step, last)  # every rank
            due = t.checkpoint_every and t.pos.step % t.checkpoint_every == 0
            if stop is not None or due:
                sums = tally.fold(t.pos)
                t.checkpoints.save(t.pos, sums, tally.scheme)
                if stop is not None:
                    sync.refresh_parameters()  # as at an epoch's end, after the fold
                    keep_lines_in_log()  # a dead launcher's SIGTERM: its log gets the stop
                    t.pos.sums = sums  # as the checkpoint holds it: a resume in memory too
                    raise _stopped(t, stop)
    tally.fold(t.pos)  # a collective: every rank's steps of the epoch are in
    sync.refresh_parameters()  # so each rank holds what it trained (async shards)
    t._layout.check(sync)  # a float64 weight beside float32 gradients trains on
    t.pos = Position(t.pos.epoch + 1, t.pos.step, 0, {})
    # what a step trained on: the batch asked for claimed 100000 of a step of 1438
    record = tally.record(t.pos, sampler.examples_per_step, t.accuracy is not None)
    if test is not None:
        record.update(t.evaluate(test))
    return record, tally.scheme


def _stopped(trainer: Trainer, stop: AgreedStop) -> Preempted:
    """The :class:`Preempted` a fit of ``trainer`` raises at ``stop``, its checkpoint saved:
    its line, and where it stopped as data (the step, the folder, whether this rank wrote it),
    which a command's ending names the checkpoint file by; the way on as a note."""
    pos, sync = trainer.pos, trainer.sync
    stopped = Preempted(
        stop.said(pos.step),
        EXIT_STATUS[stop.signal],
        step=pos.step,
        out_dir=trainer.out_dir,
        is_chief=sync.is_chief,
        world_size=sync.world_size,
    )
    add_note(stopped, way_on(trainer.out_dir))  # what it saved, how to go on
    return stopped


@contextmanager
def sums_kept_at_an_error(trainer: Trainer, tally: EpochTally) -> Iterator[None]:
    """Where an error or a second Ctrl-C ends the epoch in its middle, keep its sums so far in
    ``trainer.pos`` as a stop does: a fit without an output directory resumes from that
    position in memory (:mod:`~distconv.memory_resume`), and the epoch's record then covered
    its steps since alone, or since an earlier stop's sums, under the whole epoch's name. Only
    where the sums need no transport (one process's own ``allreduce_sum``): another sync's
    fold, a collective, may wait for a rank or a shard that is gone. Elsewhere the sums are
    dropped (``{}``), and the resume says its epoch counts from there.

    A step cut after its updates were made and counted (``pos.step``), before its epoch counted
    it (the first step's order agreed, a third Ctrl-C there) counts in its epoch too: the
    weights hold it, and a resume trained its batch again. Its loss never reached the tally,
    so the sums are dropped there too."""
    step, in_epoch = trainer.pos.step, trainer.pos.step_in_epoch
    try:
        yield
    except Preempted:  # a stop: its sums kept already, as its checkpoint's
        raise
    except BaseException:
        pos, sums = trainer.pos, {}
        cut = pos.step - step > pos.step_in_epoch - in_epoch  # counted, its epoch's count not
        if not cut and type(trainer.sync).allreduce_sum is SyncStrategy.allreduce_sum:
            with contextlib.suppress(Exception):  # a NaN sum, a closed sync: the error first
                sums = tally.fold(pos)
        pos.step_in_epoch += cut
        pos.sums = sums if pos.step_in_epoch else {}
        raise


def way_on(out_dir: Path | None) -> str:
    """What a stop saved and how to go on from it: a note under the stop's line, which a
    notebook's traceback shows (the line alone read the same with and without an output
    directory). A note, not more of the line: the command line prints the line, and the
    launcher and operators read it."""
    if out_dir is None:
        return (
            "no out_dir (--out): nothing saved; fit(..., resume=True) on this Trainer "
            "continues from its weights in memory"
        )
    return f"checkpoint saved in {out_dir}; fit(..., resume=True) (--resume) continues it"
