"""The run's step numbers in :class:`~distconv.sync.mpi.MPISync`: ``step`` counts from where the
Trainer says the run is (:meth:`StepNumbers.start_at`), not from 0 in each process, so after a
resume its errors, the step check's words and the watchdog's phase name the steps the
checkpoint, the log and the metrics name.

``step`` counts from 0: ``step N`` is the step after N whole ones (the checkpoint of step N's
next, the Trainer's step N + 1), and ``after N steps`` follows N of them. The ranks compare it
too: each step's check posts it, every meeting and setup's check say it, and close's last
exchange. The contract tells every rank the same step (the Trainer's position is the chief's,
shared with every rank before the first step), so they compare like with like; a script that
tells two ranks different steps has them refused at that step's check, naming both.

A step told is taken by the next ``start_step`` that begins a step, not at once: one refused
(a step unfinished, or one that failed and wants a setup) names the step it refuses, and what
counts a failed step (how far back it is, said at setup) or abandoned ones (``steps_ended``)
stays within one numbering, no step beginning between a failure and the setup that settles it
on the rank that failed. Another rank may begin one there, told a number past the failed
step's count (a step every rank skipped came between): its check is refused (no rank takes
it), and the count the ranks compare at setup and close (:meth:`StepNumbers._counted_step`)
is the one before it, its number told again for the next step that begins. Else the second
fit after a step that failed on one rank alone was refused, the ranks' steps apart, and their
close aborted the job.
"""

from __future__ import annotations


class StepNumbers:
    """The run's step numbers of :class:`~distconv.sync.mpi.MPISync` (a mixin, the base of
    its :class:`~.collectives.RankCollectives`, whose meetings say them): ``step``, set from
    :meth:`start_at` when a step begins (the sync's ``start_step`` calls :meth:`_number_step`).

    Attributes:
        step: the step under way, or the next (0-based); +1 as each ``finish_step`` ends (an
            abandoned step is counted apart).
    """

    step: int
    _check_refused: bool  # the sync's: the step's check failed, on every rank that made it
    #: the step :meth:`start_at` told, until a step begins
    _told_step: int | None = None
    #: the count before the step under way (or the last) took its told number; None: it took
    #: none, or its number was given back (:meth:`_settle_step`)
    _numbered_from: int | None = None

    def start_at(self, step: int) -> None:
        """The run's ``step`` the next step follows (the contract's call, on every rank alike):
        the next ``start_step`` that begins a step numbers it ``step``, and those after it on.

        Raises:
            ValueError: ``step`` is not a count (an int >= 0).
        """
        super().start_at(step)  # type: ignore[misc]  # the contract's check, down the MRO
        self._told_step = int(step)

    def _number_step(self) -> None:
        """A step begins: number it as :meth:`start_at` told, if it did since the last."""
        told, self._numbered_from = self._told_step, None
        if told is not None:
            self._numbered_from, self.step, self._told_step = self.step, told, None

    def _counted_step(self) -> int:
        """``step`` as the ranks compare it at setup and close: where the step under way (or
        the last) was refused at its check, which no rank takes, the count before it took its
        told number (a rank refused before its check never took one)."""
        if self._check_refused and self._numbered_from is not None:
            return self._numbered_from
        return self.step

    def _settle_step(self) -> None:
        """Setup (before its check): a step refused at its check gives its told number back,
        told again to the next step that begins (unless :meth:`start_at` told another since)."""
        if self._check_refused and self._numbered_from is not None:
            if self._told_step is None:
                self._told_step = self.step
            self.step, self._numbered_from = self._numbered_from, None
