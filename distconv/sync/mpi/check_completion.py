"""Completing a step's check in :class:`~distconv.sync.mpi.MPISync`: the first thing each step
waits for, on the compute thread.

``start_step`` posts the ranks' agreement on step, layout and examples
(:class:`~distconv.sync.mpi.step_check.StepCheck`); it is completed just before the step's first
gradient collective: in backward, as the first piece goes (streamed, once its gradients are in:
its bucket may not be complete yet) or the first bucket is packed, or at the head of
``finish_step`` where none went during backward. A rank ahead of the others waits there for the
slowest to post its own.

That wait is the step's exchange as much as ``finish_step``'s is, and where a slow rank's cost
lands under MPI (on the parameter server it lands in ``finish_step``). ``sync_seconds`` is so
the time the step's exchange waited: its check in backward and ``finish_step``. The check's
wait in backward (the step open, ``_in_step``) is added here, one clock pair a step, only while
the check is pending (the later buckets of the step find it complete and read no clock); at
the head of ``finish_step`` (``_in_step`` cleared first) that call's own timer counts it, so it
is counted once.
"""

from __future__ import annotations

import time

from distconv.sync.base import SyncError
from distconv.sync.mpi.step_check import StepCheck


class CheckCompletion:
    """The step check's completing half of :class:`~distconv.sync.mpi.MPISync` (a mixin).

    It reads ``_check`` and ``_in_step`` and sets ``_check_refused``, ``_ended_alike``,
    ``_total``, ``_matched`` and ``sync_seconds``, which the sync sets up (``start_step`` resets
    the flags each step).
    """

    _check: StepCheck
    _in_step: bool
    sync_seconds: float
    _check_refused: bool
    _ended_alike: bool
    _total: int
    _matched: bool

    def _complete_check(self) -> None:
        """Finish ``start_step``'s exchange (:class:`StepCheck`): stop on a mismatch, else
        learn the step's global examples. Called before the step's first gradient collective;
        in the step (backward), the time it waited is added to ``sync_seconds``."""
        timed = self._in_step and self._check.pending  # else finish_step's timer, or no wait
        began = time.perf_counter() if timed else 0.0
        try:
            total = self._check.complete()
        except SyncError:  # on every rank it reached: no rank takes this step, and none waits
            self._check_refused = self._ended_alike = True  # in a collective of it: close leaves
            raise
        finally:  # a refusal's or an interrupt's wait too: it was waited all the same
            if timed:
                self.sync_seconds += time.perf_counter() - began
        if total is not None:
            self._total, self._matched = total, True
