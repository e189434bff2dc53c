"""A worker's step order: the refusals :class:`~distconv.sync.local.LocalSync` makes, made by
the parameter-server client before anything leaves.

Without them a gradient outside a step was pushed with the last step's number and example
count, a parameter fired twice was refused by its shard only at ``finish_step`` (in words that
name block indices), and another model's parameter of a setup parameter's name was pushed
into that parameter's blocks, whose value then took the update. A ``start_step`` inside an
unfinished step sent the first step's queued gradients with the second's.

:class:`StepOrder` is the strategy :class:`~distconv.sync.ps.client.PServerSync` is built
on: it reads the client's ``_by_name`` (parameter name -> index in ``params``, from setup).
Which parameters fired in the step is the base's record (:meth:`SyncStrategy.check_gradient`),
the one LocalSync keeps too.
"""

from __future__ import annotations

from distconv.parameter import Parameter
from distconv.sync.base import SyncError, SyncStrategy
from distconv.sync.closing import clear_step_record
from distconv.sync.local import unfinished_step_refusal  # LocalSync's words


class StepOrder(SyncStrategy):
    """A strategy that refuses a gradient out of the step's order before anything leaves."""

    _by_name: dict[str, int]  # parameter name -> index in params, from setup

    def start_step(self, examples: int) -> None:
        """A step begins: each parameter given to setup may fire once until it ends.

        Raises:
            SyncError: the last step is unfinished (no ``finish_step`` or ``abandon_step``
                since): its queued gradients went out with this one's, under its number and
                example count. Checked first: the open step keeps its examples.
        """
        if self._taken is not None:
            raise unfinished_step_refusal(type(self).__name__)
        super().start_step(examples)

    def _end_step(self) -> None:
        """A new setup (the client's, which does not call the base's) ends the step, as the
        base's does: gradients are refused until the next :meth:`start_step`, and the last
        model's parameters, which :meth:`check_gradient`'s cache held, are let go of."""
        clear_step_record(self)

    def _take_gradient(self, param: Parameter) -> int:
        """Index of ``param`` among the parameters given to setup, counted as fired.

        Raises:
            SyncError: after :meth:`close` (which ends the step: a gradient was sent on a
                closed socket), outside a step, for a parameter fired twice in the step, or
                for one not given to setup (none of its name, or another model's of that name).
        """
        self.check_gradient(param)
        return self._by_name[param.name]

    def _finish_started_step(self) -> None:
        """End the step :meth:`finish_step` finishes, before its pushes go out.

        Raises:
            SyncError: no step was started, or it ended already.
        """
        if self._taken is None:
            raise SyncError(f"{type(self).__name__}.finish_step() without start_step()")
        self._taken = None  # now, not as the base's wrapper does once the step's replies are in
