"""A step that ends unfinished: :meth:`Abandon.abandon_step`, and what the next setup completes.

A rank abandons a step where a layer (or the sync) raised in it: its collectives may be open on
every rank, so the step stays open (``start_step`` refuses it, ``close`` aborts) until the next
``setup``, which completes its check and sends what it left of its pieces on every rank
(:meth:`Abandon._drain_abandoned`).
"""

from __future__ import annotations

from collections.abc import Callable

from distconv.sync.base import SyncError
from distconv.sync.mpi.buckets import Bucket, detach_gradients
from distconv.sync.mpi.pieces import PiecePump
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.updates import drain_abandoned
from distconv.sync.mpi.used import UsedParams


class Abandon:
    """The abandoning half of :class:`~distconv.sync.mpi.MPISync` (a mixin before its bases).

    It reads and sets what the sync sets up: ``buckets``, ``_in_step``, ``_pump`` (the step's
    wire), ``_abandoned`` (an abandoned step's wire, for setup), ``abandoned_steps``,
    ``_check_refused``, ``_matched``, ``_check`` and ``_used``, and calls the sync's
    ``_complete_check`` and ``_take_next_rate``.
    """

    buckets: list[Bucket]
    _in_step: bool
    _pump: PiecePump | None
    _abandoned: PiecePump | None
    abandoned_steps: int
    _check_refused: bool
    _ended_alike: bool
    world_size: int
    _matched: bool
    _check: StepCheck
    _used: UsedParams
    _complete_check: Callable[[], None]  # the sync's (annotated only: not shadowed here)
    _take_next_rate: Callable[[], None]  # the sync's (idem)

    def abandon_step(self) -> None:
        """The step ends unfinished: later gradients and ``finish_step`` are refused as outside
        a step (LocalSync's, inherited, made them bare errors here). It stays open: ``start_step``
        refuses and ``close`` aborts where other ranks may wait in its collectives, until the
        next ``setup``, which completes its check and its wire first (``_drain_abandoned``).

        Each parameter gets its gradient back as an array of its own (``detach_gradients``):
        MPI's writes into the buffers never reach gradients zeroed since (``Trainer.fit``).

        Raises:
            KeyboardInterrupt: a Ctrl-C that ``start_step`` kept as it posted the step check
                (:meth:`~.step_check.StepCheck.raise_kept`), once the step is let go of: the
                step's own error (the caller's, being handled) its context. Kept for
                ``finish_step`` to say in the flags, it was otherwise dropped: the user's
                request to stop lost, the job trained on."""
        self._let_go()
        self._check.raise_kept()

    def _fail_step(self, error: BaseException, said: BaseException, checked: bool) -> None:
        """``finish_step`` failed (``error``) before its flags went: the step check read, if
        an interrupt in its Wait left it unread (as the other ranks read it), then the flags
        marked failed (:meth:`~.used.UsedParams.fail`), to say ``said``. Made again after a
        Ctrl-C, it reads and marks nothing twice. ``checked``: the check had failed before.

        Raises:
            BaseException: ``said``, from the check's SyncError (every rank refused the step at
                its first collective: none sends a piece or counts it), or where no other rank
                waits (:meth:`~.used.UsedParams.fail`)."""
        try:  # (None where it was read: a pack failed, or a mismatch)
            self._complete_check()
        except SyncError as refused:
            self._ended_alike = True  # all done, alike: close leaves
            raise said from refused
        self._ended_alike = self._check_refused > checked  # refused here, as just above
        self._used.fail(error, self.world_size, said)  # passed: the others wait for the pieces

    def _let_go(self) -> None:
        """:meth:`abandon_step`'s bookkeeping, which raises nothing (setup's drain, close)."""
        if self._in_step:  # counted apart: a rank that finished it counted it as a step
            detach_gradients(self.buckets)  # not one whose check failed: no rank took that
            self._abandoned, self.abandoned_steps = self._pump, self.abandoned_steps + 1
            self.abandoned_steps -= self._check_refused
        self._in_step = False
        # a rate set inside the step (kept for the next one) is the optimizer's now, as after
        # a step done: else a fit's start read the posted rate and warned of one set by hand
        self._take_next_rate()

    def _drain_abandoned(self) -> None:
        """Abandon a step still open, then send and complete on every rank what an abandoned
        step left of its pieces (:func:`~.updates.drain_abandoned`), if its check passed."""
        self._let_go()  # else setup left it open, every later start_step refused
        if self._abandoned is not None:
            pump, self._abandoned = self._abandoned, None
            try:
                self._complete_check()
            except SyncError:  # every rank alike (an allgather): none sent a piece, or took
                self.abandoned_steps -= 1  # the step (abandon_step counted it, then pending)
                return
            if self._matched:
                drain_abandoned(pump, self._used)
