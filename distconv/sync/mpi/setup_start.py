"""How an MPI setup begins, and how one ends that failed on every rank alike: the ranks refused
the job in its check (a ``JobMismatch``), or a rank failed before its check and told the others
there (:meth:`SetupStart.fail_setup`, or an error inside setup before it).

Either way every collective of the setup completed on every rank: none waits for another, the
sync serves meetings between steps as after its last good setup and refuses a step, and close
leaves the job instead of aborting it (the told error propagating included, or the Ctrl-C
:meth:`SetupStart.fail_setup` raised in its place where a setup succeeded before:
:class:`~distconv.sync.mpi.shutdown.Shutdown`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distconv.logs import settle_notes
from distconv.notes import add_note
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.closing import clear_step_record
from distconv.sync.errors import JobRefused
from distconv.sync.mpi.collectives import held
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.telling import error_text, untold
from distconv.sync.mpi.used import UsedParams
from distconv.sync.mpi.watchdog import Watchdog

#: ``_open`` from a setup's start until it succeeds, or fails on every rank alike
SETUP_OPEN = "setup (it failed)"


class SetupStart:
    """The start of :class:`~distconv.sync.mpi.MPISync`'s setup, and its failure told (a mixin
    before :class:`~distconv.sync.mpi.collectives.RankCollectives`).

    It reads and sets what the sync sets up: ``params``, ``_open``, ``_changed_in``,
    ``_ended_alike``, ``_failed_setup``, ``_told_failure``, ``_refused_untold``,
    ``_noted_interrupt``, ``_watchdog``, ``_check``, ``_used``, ``_setting_up``, ``_job_met``,
    ``closed`` and ``world_size``, reads ``_grad_comm``, and calls the sync's ``_drain_abandoned``,
    ``_stop_thread`` and ``_fail_before_check``.
    """

    params: list[Parameter]
    _open: str | None
    _changed_in: str | None
    _ended_alike: bool
    _failed_setup: str | None
    _told_failure: BaseException | None
    _refused_untold: SyncError | None  # the job check's refusal before the descriptions: none told
    _grad_comm: Any  # a good setup's (its last exchange at close), None before one
    _watchdog: Watchdog
    _check: StepCheck
    _used: UsedParams
    _setting_up: bool
    _job_met: bool
    closed: bool
    world_size: int
    _drain_abandoned: Callable[[], None]  # the sync's (annotated only: not shadowed here)
    _stop_thread: Callable[[], None]
    _fail_before_check: Callable[[BaseException], None]
    #: the Ctrl-C :meth:`fail_setup` raised with its note, until a setup begins again: that
    #: settles the note, which a later Ctrl-C raised in the handler that caught it (its
    #: context) says no more (:func:`~distconv.logs.settle_notes`)
    _noted_interrupt: BaseException | None = None

    def _begin_setup(self) -> tuple[str | None, list[Parameter]]:
        """What must happen before this rank's setup calls MPI for the job check, a setup's
        or one that cannot be made (:meth:`fail_setup`); returns what a failure every rank
        shares keeps: what was open when the parameters began to change, and which they are."""
        changed_in, kept = self._changed_in, self.params
        self._open = self._changed_in = SETUP_OPEN
        self._ended_alike = False  # a failed step's: close after a failed setup aborts
        self._told_failure = None  # a failure told at an earlier setup is not this one's
        if self._noted_interrupt is not None:  # what its note says is over: set up again
            settle_notes(self._noted_interrupt)
            self._noted_interrupt = None
        self._watchdog.phase = "setup"  # a second fit's too (it said "after step N" there)
        self._drain_abandoned()
        self._stop_thread()  # before the main thread calls MPI (MPI_THREAD_SERIALIZED)
        self._check.drain()  # an abandoned step's, posted on every rank: setup meets after it
        self._used.drop()  # a failed finish_step's, started on every rank before it failed
        return changed_in, kept

    def _failed_alike(self, error: BaseException, kept: tuple[str | None, list[Parameter]]) -> None:
        """Where setup's ``error`` ended it on every rank alike (a ``JobMismatch``, or this
        rank's own failure told in the job check), take back ``kept``
        (:meth:`_begin_setup`'s): nothing changed, and nobody waits, but no step runs. So too
        for another refusal every rank raises alike (``raised_alike``) once setup's last
        exchange is made (a ``grad_hook`` the layout cannot serve: :mod:`~.hook`), the
        parameters' broadcast made. Any other error leaves setup open: close aborts the job
        (another rank may wait in it)."""
        alike = isinstance(error, JobRefused) and error.raised_alike
        if not alike and error is not self._told_failure:
            return
        self._changed_in, self.params = kept
        self._open = None  # every collective of it made: close leaves
        failed = f"a setup that failed on %s ({error_text(error)})"
        if error is not self._told_failure:
            self._failed_setup = failed % "every rank"
        elif self._refused_untold is None:
            self._failed_setup = failed % "this rank before its job check, told to the others"
        else:  # the ranks counted different steps: refused in the check, never told
            failed %= "this rank before its job check"
            self._failed_setup = f"{failed}, {untold(self._refused_untold)}"

    def fail_setup(self, error: BaseException) -> None:
        """This rank cannot set up (``error``): make the job check's exchange all the same, its
        description naming ``error``, as a setup that raised before its check does
        (:meth:`~.collectives.RankCollectives._fail_before_check`). The other ranks' setup
        raises a ``JobMismatch`` saying "rank R could not set up: Type: text" at once, where
        they waited until this rank's close aborted the job (or the watchdog's timeout); this
        rank is left as they are, and its close leaves the job with ``error`` propagating. On a
        sync never set up that close makes no last exchange: a rank told that sets up again
        waits for this one in its job check until the watchdog's timeout, so after a failed
        first fit every rank sets up again, or every rank closes. Nothing on a closed sync, or
        with one rank.

        A Ctrl-C in it (held to the exchange's end) is raised: the user's, it ends the run in
        ``error``'s place, which it says in a note (and whether the others were told), where
        ``error`` was only its context, which a one-line ending ("interrupted") never says.
        Where they were told and a setup succeeded before (a second fit), close leaves the job
        with it propagating, as with ``error``: its last exchange meets whatever another rank
        does next, a setup made again too, which is refused there. Where none did, close
        aborts: a rank told only ``error`` may set up again (the way on after a failed setup),
        and it waited for this one in its job check until the watchdog's timeout, no last
        exchange made; so where they were not told (it came before the exchange): they wait."""
        self._refused_untold = None  # an earlier setup's: this Ctrl-C may come before its own
        try:
            self._tell_failed_setup(error)
        except KeyboardInterrupt as interrupt:
            told = self._told_failure is error  # a JobMismatch on every rank: none waits
            said = f"this rank could not set up ({error_text(error)}); "
            if self._refused_untold is not None:  # refused before the descriptions: no wait
                said += untold(self._refused_untold)
            elif told:
                said += "the others were told"
            else:
                said += "the others were not told"
            add_note(interrupt, said)
            self._noted_interrupt = interrupt
            # in the told error's place where close's last exchange tells a rank that set
            # up again that this one left (no sync set up: none made, that rank would wait)
            if told and self._grad_comm is not None:
                self._told_failure = interrupt
            raise

    @held  # as setup: a Ctrl-C in the exchange is raised once it is made
    def _tell_failed_setup(self, error: BaseException) -> None:
        if self.closed or self.world_size == 1:
            return
        kept = self._begin_setup()
        clear_step_record(self)  # as setup's: a step left open is let go of
        self._setting_up, self._job_met = True, False
        try:
            self._fail_before_check(error)
        finally:
            self._setting_up = False
        self._failed_alike(error, kept)
