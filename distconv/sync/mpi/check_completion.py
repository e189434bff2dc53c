"""Completing a step's check in :class:`~distconv.sync.mpi.MPISync`: the first thing each step
waits for, on the compute thread.

``start_step`` posts the ranks' agreement on step, layout and examples
(:class:`~distconv.sync.mpi.step_check.StepCheck`); it is completed just before the step's first
gradient collective: in backward, as the first bucket is packed, or at the head of
``finish_step`` where no bucket went during backward. A rank ahead of the others waits there for
the slowest to post its own.
"""

from __future__ import annotations

from distconv.sync.base import SyncError
from distconv.sync.mpi.step_check import StepCheck


class CheckCompletion:
    """The step check's completing half of :class:`~distconv.sync.mpi.MPISync` (a mixin).

    It reads ``_check`` and sets ``_check_refused``, ``_total`` and ``_matched``, which the
    sync sets up and each ``start_step`` resets.
    """

    _check: StepCheck
    _check_refused: bool
    _total: int
    _matched: bool

    def _complete_check(self) -> None:
        """Finish ``start_step``'s exchange (:class:`StepCheck`): stop on a mismatch, else
        learn the step's global examples. Called before the step's first gradient collective."""
        try:
            total = self._check.complete()
        except SyncError:  # on every rank it reached: no rank takes this step
            self._check_refused = True
            raise
        if total is not None:
            self._total, self._matched = total, True
