"""How an MPI setup begins, and how one ends that failed on every rank alike: the ranks refused
the job in its check (a ``JobMismatch``), or a rank failed before its check and told the others
there (an error inside setup before it:
:meth:`~distconv.sync.mpi.collectives.RankCollectives._fail_before_check`).

Either way every collective of the setup completed on every rank: none waits for another, the
sync serves meetings between steps as after its last good setup and refuses a step, and close
leaves the job instead of aborting it (the told error propagating included:
:class:`~distconv.sync.mpi.shutdown.Shutdown`).
"""

from __future__ import annotations

from collections.abc import Callable

from distconv.parameter import Parameter
from distconv.sync.mpi.collectives import error_text
from distconv.sync.mpi.comm import JobMismatch
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.used import UsedParams
from distconv.sync.mpi.watchdog import Watchdog

#: ``_open`` from a setup's start until it succeeds, or fails on every rank alike
SETUP_OPEN = "setup (it failed)"


class SetupStart:
    """The start of :class:`~distconv.sync.mpi.MPISync`'s setup, and its failure alike (a
    mixin before :class:`~distconv.sync.mpi.collectives.RankCollectives`).

    It reads and sets what the sync sets up: ``params``, ``_open``, ``_changed_in``,
    ``_ended_alike``, ``_failed_setup``, ``_told_failure``, ``_watchdog``, ``_check`` and
    ``_used``, and calls the sync's ``_drain_abandoned`` and ``_stop_thread``.
    """

    params: list[Parameter]
    _open: str | None
    _changed_in: str | None
    _ended_alike: bool
    _failed_setup: str | None
    _told_failure: BaseException | None
    _watchdog: Watchdog
    _check: StepCheck
    _used: UsedParams
    _drain_abandoned: Callable[[], None]  # the sync's (annotated only: not shadowed here)
    _stop_thread: Callable[[], None]

    def _begin_setup(self) -> tuple[str | None, list[Parameter]]:
        """What must happen before this rank's setup calls MPI for its job check; returns what
        a failure every rank shares keeps: what was open when the parameters began to change,
        and which they are."""
        changed_in, kept = self._changed_in, self.params
        self._open = self._changed_in = SETUP_OPEN
        self._ended_alike = False  # a failed step's: close after a failed setup aborts
        self._told_failure = None  # a failure told at an earlier setup is not this one's
        self._watchdog.phase = "setup"  # a second fit's too (it said "after step N" there)
        self._drain_abandoned()
        self._stop_thread()  # before the main thread calls MPI (MPI_THREAD_SERIALIZED)
        self._check.drain()  # an abandoned step's, posted on every rank: setup meets after it
        self._used.drop()  # a failed finish_step's, started on every rank before it failed
        return changed_in, kept

    def _failed_alike(self, error: BaseException, kept: tuple[str | None, list[Parameter]]) -> None:
        """Where setup's ``error`` ended it on every rank alike (a ``JobMismatch``, or this
        rank's own failure told in the job check), take back ``kept``
        (:meth:`_begin_setup`'s): nothing changed, and nobody waits, but no step runs. Any
        other error leaves setup open: close aborts the job (another rank may wait in it)."""
        if not isinstance(error, JobMismatch) and error is not self._told_failure:
            return
        self._changed_in, self.params = kept
        self._open = None  # every collective of it made: close leaves
        told = error is self._told_failure
        whose = "this rank before its job check, told to the others" if told else "every rank"
        self._failed_setup = f"a setup that failed on {whose} ({error_text(error)})"
