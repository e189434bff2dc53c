"""The equivalence check with a restart in the middle: a transport that trains right from
scratch must also restore right from a checkpoint.

The plain check (:mod:`distconv.equivalence`) starts Adam's state as zeros on every rank, so it
cannot see a transport that does not hand every rank the optimizer state a checkpoint holds
(Adam's moments and step count): one that loads it on rank 0 alone, broadcasts the parameters
but not the state, or drops it. Such a transport trains silently wrong after every restart.
A job with ``restart_at`` stops each rank by the stop request a scheduler sends (SIGTERM, taken
by the Trainer's own handler: the ranks agree on a step, checkpoint and raise
:class:`~distconv.resume.Preempted`), closes its sync, and resumes (``fit(resume=True)``) through
a new sync and a model drawn from other seeds, so that only a real restore makes the ranks the
job's again; the weights they end with are compared with the uninterrupted reference.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from distconv.equivalence import Job, Weights, refuse_other_optimizer, weights
from distconv.resume import Preempted
from distconv.sequence_set import as_data_set, set_length
from distconv.stop_agreement import STOP_CHECK_EVERY
from distconv.trainer import Trainer

if TYPE_CHECKING:
    from distconv.optim import Optimizer
    from distconv.sync.base import SyncStrategy


class StopAfter(Trainer):
    """A :class:`~distconv.trainer.Trainer` that sends SIGTERM, a scheduler's stop, to its own
    thread after step ``stop_after`` of a fit, which then stops as after any such signal
    (:mod:`distconv.stop_request`), raising :class:`StoppedItself`. The fit must run in the
    main thread: only its handler takes the signal (elsewhere SIGTERM would end the process),
    so it is refused elsewhere (``ValueError``).

    A stop this rank's process was asked for before, or besides, its own (a scheduler's
    SIGTERM, a Ctrl-C) is the process's, not the fit's: it raises a plain
    :class:`~distconv.resume.Preempted`, as any fit does, for the caller to stop."""

    def __init__(self, *args: Any, stop_after: int, **kwargs: Any) -> None:
        refuse_unreachable_stop()
        super().__init__(*args, **kwargs)
        self.stop_after = stop_after
        self.stopped_itself = False  # sent the only stop signal of this fit so far

    def train_step(self, arrays: Any, passes: list) -> tuple[Any, Any, int]:
        done = super().train_step(arrays, passes)
        if self.pos.step == self.stop_after:
            self.stopped_itself = not self._stop.received  # else a stop asked from outside
            if self.stopped_itself:  # that one stops it, by its own signal
                # to this thread, not the process: its handler has run when the call returns,
                # where one sent to the process may land on a transport's thread and run later
                signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
        return done

    def fit(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        try:
            return super().fit(*args, **kwargs)
        except Preempted as stop:
            if not self.stopped_itself or self._stop.received != {signal.SIGTERM}:
                raise  # the process was asked to stop, by its scheduler or a person
            raise StoppedItself(str(stop), stop.exit_status) from None


class StoppedItself(Preempted):
    """:class:`StopAfter`'s fit stopped by its own signal alone, with a checkpoint."""


def restarted_weights(
    sync: SyncStrategy,
    job: Job,
    restart: Callable[[Optimizer], SyncStrategy] | None,
    out_dir: str | os.PathLike | None,
) -> Weights:
    """This rank's share of ``job``, stopped at ``job.restart_at`` and resumed: the weights it
    ends with. ``sync`` trains from the job's model, checkpointing in ``out_dir`` (every rank's
    the same folder: the chief writes it), until the stop; it is closed, and the sync
    ``restart(job.make_optimizer())`` makes resumes a model of other seeds from the newest
    checkpoint to the end, and is closed. A stop the process was asked for from outside (a
    scheduler's SIGTERM before the check's own, a Ctrl-C) is not taken for the check's: its
    :class:`~distconv.resume.Preempted` is raised, ``sync`` left open.

    Raises:
        ValueError: ``restart`` or ``out_dir`` is None; ``job.restart_at`` is not an int >= 1,
            or one past the job's last step (refused before it trains), or the job ended
            before its ranks agreed on a stop; this is not the main thread (the only one a
            stop signal reaches), or it blocks SIGTERM; the new sync's optimizer is not the
            job's, or its rank or world size not ``sync``'s.
        Preempted: the process was asked to stop (see above).
    """
    _refuse(job, sync.world_size, restart, out_dir)
    rank, world = sync.rank, sync.world_size
    stopped = None
    try:
        job.fit(
            job.model_of(rank), sync, job.batch_size, world, out_dir=out_dir,
            stop_after=job.restart_at,
        )  # fmt: skip
    except StoppedItself as stop:  # another stop, the process's own, goes on to the caller
        stopped = stop
    sync.close()  # outside the except clause: an MPISync closed in one aborts its job
    if stopped is None:
        when = "at once" if world == 1 else f"every {STOP_CHECK_EVERY} steps and at its last step"
        raise ValueError(
            f"restart_at={job.restart_at}: the job ended before its ranks agreed on a stop ({when})"
        )  # refuse_restart_at refused a stop past the end: a fit that ended early
    resumed = restart(job.make_optimizer())
    try:
        refuse_other_optimizer(resumed, job)
        if (resumed.rank, resumed.world_size) != (rank, world):
            raise ValueError(
                f"the restart made rank {resumed.rank} of {resumed.world_size}, not rank "
                f"{rank} of {world}: make it as the sync it replaces"
            )
        net = job.model_of(rank, resumed=True)
        job.fit(net, resumed, job.batch_size, world, out_dir=out_dir, resume=True)
    finally:
        resumed.close()
    return weights(net)


def _refuse(
    job: Job,
    world_size: int,
    restart: Callable[..., Any] | None,
    out_dir: str | os.PathLike | None,
) -> None:
    """Raise ``ValueError`` where the restart cannot run (see :func:`restarted_weights`)."""
    refuse_restart_at(job, world_size)
    if restart is None or out_dir is None:
        raise ValueError(
            "a job with restart_at needs restart, a function making the sync that resumes "
            "from an optimizer, and out_dir, the folder every rank checkpoints in"
        )
    refuse_unreachable_stop()


def refuse_restart_at(job: Job, world_size: int) -> None:
    """Raise ``ValueError`` where ``job.restart_at`` is no step ``world_size`` ranks stop at:
    not an int >= 1, or one past the job's last step, so that every rank would train the whole
    job for nothing. The ranks stop at the step itself on one rank, else at the next multiple
    of :data:`~distconv.stop_agreement.STOP_CHECK_EVERY` or the fit's last step, which is a
    check too. The steps are counted on
    the rows the job's data has (a ``dataset`` of one's own may give others than it is asked)."""
    at = job.restart_at
    if isinstance(at, bool) or not isinstance(at, int) or at < 1:
        raise ValueError(f"restart_at must be an int >= 1 (0: no restart), got {at!r}")
    rows = set_length(as_data_set(job.data(world_size)))  # a dataset's own, as it trains
    per_epoch = -(-rows // job.global_batch(world_size))
    last = job.epochs * per_epoch
    if at > last:
        raise ValueError(
            f"restart_at={at} is past the job's last, step {last} ({job.epochs} epochs of "
            f"{per_epoch}): give it one by then"
        )


def refuse_unreachable_stop() -> None:
    """Raise ``ValueError`` where the SIGTERM of a stop after a step would not reach the fit's
    handler: outside the main thread, which alone handles signals (the fit installs no
    handler there, and the signal ends the process), or where this thread blocks SIGTERM
    (``signal.pthread_sigmask``, a mask a process inherits from its parent too): the signal
    would wait there, pending, through the whole fit, and reach the process's own handler, or
    end it, once unblocked after the check."""
    if threading.current_thread() is not threading.main_thread():
        raise ValueError(
            "a job with restart_at is stopped by SIGTERM, which only a fit in the main thread "
            "takes: run this rank in a process's main thread"
        )
    if signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, ()):  # the mask, unchanged
        raise ValueError(
            "a job with restart_at is stopped by SIGTERM, which this thread blocks "
            "(signal.pthread_sigmask): unblock it for the check"
        )
