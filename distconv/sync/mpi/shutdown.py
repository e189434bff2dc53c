"""How an MPI sync ends: leave the job with the other ranks, or abort it.

:meth:`Shutdown.close` is the sync contract's ``close`` for :class:`~distconv.sync.mpi.MPISync`:
a rank that fails, or cannot leave cleanly (a step or setup still open,
:func:`~distconv.sync.mpi.clean_leave.why_not_leave`), aborts the job at once, since the other
ranks may wait for it; else the ranks leave together (:func:`~distconv.sync.mpi.clean_leave.leave`).
A step whose ``finish_step`` failed once every collective of it completed (``_ended_alike``:
the flags refused it on every rank, or a 16-bit wire did (``WireRefused``; with the
communication thread, close completes the flags its thread started:
:func:`~.updates.refused_alike`), or the step check did in ``finish_step``, at the step's first
collective; or it failed on this rank alone after them: an optimizer's error, a Ctrl-C kept
while the step's waits were made again) leaves no rank waiting in it, so close leaves: a rank
that finished the step and went on learns at its next exchange that this one closed
(:meth:`~distconv.sync.mpi.step_check.StepCheck.say_closed`), and is refused there, naming the
step that failed here where it failed on this rank alone.
Either way the communication thread stops and the gradients' communicator is freed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from distconv.sync.base import closing_error
from distconv.sync.closing import step_left_open
from distconv.sync.errors import JobRefused
from distconv.sync.mpi.clean_leave import leave, why_not_leave
from distconv.sync.mpi.leaving import abort_job
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import UsedParams
from distconv.sync.mpi.watchdog import Watchdog

#: ``_open`` of a sync whose setup was never called: no collective of it was ever started
NEVER_SET_UP = "the job's start (setup was never called)"


def _raised_alike(error: BaseException | None) -> bool:
    """Whether ``error`` is a refusal every rank raises alike (``raised_alike``: a
    ``JobMismatch`` in setup, a ``WireRefused`` in ``finish_step``), which a
    close leaves on where nothing is left open (``_open`` None) or the step ended alike
    (``_ended_alike``): it aborted the job there, a traceback on every rank, though ``run_main``
    says it in one line, the README's ``finally: sync.close()`` included."""
    return isinstance(error, JobRefused) and error.raised_alike


class Shutdown:
    """The closing half of :class:`~distconv.sync.mpi.MPISync` (a mixin before its bases).

    It reads what the sync sets up: ``comm``, ``rank``, ``world_size``, ``_watchdog``,
    ``_open`` (setup or the step under way; None between steps), ``_ended_alike`` (that step
    failed in ``finish_step`` with every collective of it complete), ``_failed_finish`` (that
    step, where it failed on this rank alone, untold), ``_check``, ``_used``, ``_thread``,
    ``_grad_comm``, ``steps_ended`` and ``_restore_hook``, and calls the sync's ``_let_go`` (an
    open step's bookkeeping: :class:`~.abandon.Abandon`).
    """

    comm: Any
    rank: int
    world_size: int
    _watchdog: Watchdog
    _open: str | None
    _ended_alike: bool
    _failed_finish: int | None
    _told_failure: BaseException | None
    _check: StepCheck
    _used: UsedParams
    _thread: CommThread | None
    _grad_comm: Any
    steps_ended: int
    _restore_hook: Callable[[], None]
    _let_go: Callable[[], None]  # the sync's (annotated only: not shadowed here)

    def close(self) -> None:
        """Abort the job at once if an exception propagates (other ranks may wait for this one;
        one being handled counts too: close after an ``except`` clause, not inside it) or this
        rank cannot leave cleanly (:func:`~.clean_leave.why_not_leave`), else leave it
        (:func:`~.clean_leave.leave`: a last exchange); free the communicator, unhook. A refusal
        every rank raises alike (:func:`_raised_alike`) propagating leaves too, where no setup
        or step is open, the step ended alike, or setup was never called
        (:data:`NEVER_SET_UP`): ``run_main`` says it in one line; so does this rank's own
        failure to set up, told to the others in the job check
        (:class:`~distconv.sync.mpi.setup_start.SetupStart`), where nothing opened since, and,
        where a setup succeeded before, the Ctrl-C ``fail_setup`` raised in its place once it
        was told (``run_main`` says ``interrupted`` and its note) and what was raised as the
        failure told propagated (:meth:`_of_told_failure`); a Ctrl-C that came before the
        others were told, or on a sync never set up (a rank told may set up again and wait for
        this one), aborts. A step left open with nothing propagating
        (:func:`~distconv.sync.closing.step_left_open`, which the base raises once this returns)
        aborts a job of several ranks, and leaves one of a rank alone."""
        error = closing_error()
        # a sync never set up (a script's second one, the first's refusal propagating) started
        # no collective: no rank waits in one of its (else it aborted every job so closed)
        unset = _raised_alike(error) and self._open is NEVER_SET_UP
        if _raised_alike(error) and (self._open is None or self._ended_alike or unset):
            error = None  # raised alike on every rank, none waits: the caller's to report
        if error is not None and self._open is None and self._of_told_failure(error):
            error = None  # this rank's setup failure (or fail_setup's Ctrl-C), told: none waits
        if step_left_open(error) and self.world_size == 1:
            error = None  # a step left open on a rank alone: leave (its check completed), as ever
        self._watchdog.phase = "close"
        if self.world_size > 1:
            unfinished = None if self._ended_alike or unset else self._open
            error = error or why_not_leave(self._thread, unfinished)
            if error is not None:  # before anything that may block
                abort_job(self.comm, self.rank, error)
        try:
            if error is None and self._grad_comm is not None:
                # raised, a SyncError would leave the other ranks waiting: abort them first
                abort = partial(abort_job, self.comm, self.rank) if self.world_size > 1 else None
                steps, failed = self.steps_ended, self._failed_finish
                leave(self._check, self._used, self._thread, steps, abort, failed)
        finally:
            self._release()

    def _of_told_failure(self, error: BaseException) -> bool:
        """Whether ``error`` ends this rank's setup failure told to the others
        (``_told_failure``): it is that failure, or, where a setup succeeded before, was raised
        as it propagated (a Ctrl-C after the exchange, a second one, an error raised from it).
        Every other rank's setup failed too, so none is in a step: whatever it does next opens
        with an exchange, which meets the last one close makes (refused where they differ).
        With no setup before, close makes none: a rank told may set up again, and waited for
        this one until the watchdog's timeout, so only the error told itself leaves there."""
        told = self._told_failure
        if error is told:
            return told is not None
        raised_while = error.__context__ if self._grad_comm is not None else None
        seen: set[int] = set()  # a chain a script made by hand may loop
        while raised_while is not None and id(raised_while) not in seen:
            if raised_while is told:
                return True
            seen.add(id(raised_while))
            raised_while = raised_while.__context__
        return False

    def _release(self) -> None:
        try:
            self._let_go()  # a gradient after close is refused, never sent on a freed comm
            self._watchdog.close()
            self._close_gradients()
        finally:  # a Ctrl-C or an MPI error here left the hook open: it aborted a job left
            self._restore_hook()  # does nothing once the hook is back, or was never ours

    def _close_gradients(self) -> None:
        """Stop the communication thread and free the gradients' communicator, if any."""
        self._stop_thread()
        if self._grad_comm is not None and self._grad_comm is not self.comm:
            self._grad_comm.Free()
        self._grad_comm = None

    def _stop_thread(self) -> None:
        """Let the communication thread finish what it was handed, then end it, if any."""
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
