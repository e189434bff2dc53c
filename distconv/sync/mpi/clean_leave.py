"""How a rank leaves an MPI job cleanly: whether it may (:func:`why_not_leave`), and the last
exchange with the other ranks (:func:`leave`); aborting the job is
:mod:`~distconv.sync.mpi.leaving`'s."""

from __future__ import annotations

import signal
from collections.abc import Callable

from distconv.sync.base import SyncError
from distconv.sync.closing import closed_mid
from distconv.sync.mpi.comm import WireRefused
from distconv.sync.mpi.held import HeldInterrupt
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import UsedParams


def why_not_leave(thread: CommThread | None, unfinished: str | None) -> SyncError | None:
    """Why a rank cannot just leave the others (None: it can). With a setup or a step
    ``unfinished`` (from ``setup`` or ``start_step`` until their last collective: a step
    abandoned, a setup that raised, or a ``finish_step`` that raised before every collective
    of the step completed), or after its thread skipped
    collectives, it would leave them waiting in collectives it never starts: a caught error
    must not hang the job; but a thread that skipped them after a 16-bit wire's refusal raised
    alike, in a step that ended alike (``unfinished`` None): every rank's skipped the same
    (:attr:`~.thread.CommThread.refused_alike`)."""
    failed = thread is not None and thread.error is not None
    if failed and not (unfinished is None and thread.refused_alike):
        return SyncError(f"sync closed after {thread.failure()}")
    if unfinished is not None:
        return SyncError(closed_mid(unfinished))
    return None


def leave(
    check: StepCheck,
    used: UsedParams,
    thread: CommThread | None,
    steps: int,
    abort: Callable[[BaseException], None] | None = None,
    failed_step: int | None = None,
) -> None:
    """Complete what is pending (a single rank may close mid-step), stop the thread, then the
    last exchange (:meth:`StepCheck.say_closed`, after ``steps`` steps: a rank still in a step,
    or in another meeting, learns this one has gone, and ``failed_step``, the step that failed
    on this rank alone, if any), on the calling thread: it alone calls MPI once the thread has
    stopped.

    Raises:
        SyncError: another rank is still at a step or another meeting; the thread did not
            stop, or failed in work no step reported (a reduction it still had queued, the
            zeroing of the last step's buffer; no last exchange then: the ranks' collectives
            may differ). ``abort`` (the job's, where other ranks wait) is called with it
            first, as with anything else raised here (an MPI error, a Ctrl-C before the last
            exchange was made): a Ctrl-C in that exchange is held until it is made, then raised
            without an abort, and so is a SIGTERM whose handler raises, as every rank has left
            (it aborted the job, a rank that closed first and went on to its own ending killed
            with it), whatever the handler raises: a SystemExit, or a script's own Exception
            (as distconv's Preempted is), once aborted the job too.
    """
    made: list[bool] = []
    try:
        _leave(check, used, thread, steps, failed_step, made)
    except BaseException as exc:
        if abort is not None and not made:  # made: only a held signal's handler raises since
            abort(exc)
        raise


def _leave(
    check: StepCheck,
    used: UsedParams,
    thread: CommThread | None,
    steps: int,
    step: int | None,
    made: list[bool],
) -> None:
    def refused() -> bool:  # a 16-bit wire, alike on every rank's thread, reported or not
        return thread is not None and thread.error is not None and thread.refused_alike

    if thread is None or thread.error is None:  # a failed thread skips the flags' wait
        try:
            used.drain()
        except WireRefused:  # a later (host) bucket's, refused on the thread meanwhile, after
            if not refused():  # a device bucket's on the main thread ended the step
                raise
    if thread is not None:
        thread.stop()
        # a failure no step raised (it came after the last one: zeroing its used buffer, or
        # during the stop), never a silent close; one a step raised already, said once
        if thread.error is not None and not thread.reported and not refused():
            raise SyncError(f"sync closed after {thread.failure()}")
    failed = thread is not None and thread.error is not None and not refused()
    if refused():  # the flags' start, made by every rank's thread after the refusal too
        used.drop()  # (``always``): completed here, the thread stopped, as every rank does
    # a Ctrl-C or a SIGTERM whose handler raises (SystemExit) anywhere in here, the last
    # exchange's start too: raised once it is made and checked (``made``); another signal's,
    # once it is made (say_closed). Before, a SIGTERM's was held in its Wait and check alone:
    # one raised as its start returned lost it, and the job was aborted (exit 143)
    with HeldInterrupt(), HeldInterrupt(signal.SIGTERM):
        # a step's check still posted: a single rank's, closing mid-step (with more, close
        # mid-step aborts, and every step that ended alike read its check): MPI must see it
        check.drain()
        if not failed:  # not after a failed reduction: the ranks' collectives differ
            stop = check.say_closed(steps, step)
            made.append(True)  # every rank made it: none waits for this one
            if stop is not None:
                raise stop
