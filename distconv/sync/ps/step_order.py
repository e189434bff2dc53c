"""A worker's step order: the refusals :class:`~distconv.sync.local.LocalSync` makes, made by
the parameter-server client before anything leaves.

Without them a gradient outside a step was pushed with the last step's number and example
count, a parameter fired twice was refused by its shard only at ``finish_step`` (in words that
name block indices), and another model's parameter of a setup parameter's name was pushed
into that parameter's blocks, whose value then took the update. A ``start_step`` inside an
unfinished step sent the first step's queued gradients with the second's.

:class:`StepOrder` is the strategy :class:`~distconv.sync.ps.client.PServerSync` is built
on: it reads the client's ``_by_name`` (parameter name -> index in ``params``, from setup).
"""

from __future__ import annotations

from distconv.parameter import Parameter
from distconv.sync.base import SyncError, SyncStrategy

# the refusals LocalSync makes (its wording, its "another model's" hint)
from distconv.sync.local import _refusal, unfinished_step_refusal


class StepOrder(SyncStrategy):
    """A strategy that knows which parameters fired in the step under way."""

    _by_name: dict[str, int]  # parameter name -> index in params, from setup

    #: ids of the parameters fired in the step under way; None outside a step
    _fired: set[int] | None = None

    def start_step(self, examples: int) -> None:
        """A step begins: each parameter given to setup may fire once until it ends.

        Raises:
            SyncError: the last step is unfinished (no ``finish_step`` or ``abandon_step``
                since): its queued gradients went out with this one's, under its number and
                example count. Checked first: the open step keeps its examples.
        """
        if self._fired is not None:
            raise unfinished_step_refusal(type(self).__name__)
        super().start_step(examples)
        self._fired = set()

    def _end_step(self) -> None:
        """The step ends (finished, abandoned, or a new setup): gradients are refused until
        the next :meth:`start_step`."""
        self._fired = None

    def _take_gradient(self, param: Parameter) -> int:
        """Index of ``param`` among the parameters given to setup, counted as fired.

        Raises:
            SyncError: after :meth:`close` (which ends the step: a gradient was sent on a
                closed socket), outside a step, for a parameter fired twice in the step, or
                for one not given to setup (none of its name, or another model's of that name).
        """
        fired, i = self._fired, self._by_name.get(param.name)
        refused = fired is None or id(param) in fired or i is None or self.params[i] is not param
        if refused or self.closed:
            raise _refusal(param, fired, self._by_name, self.closed)
        fired.add(id(param))
        return i

    def _finish_started_step(self) -> None:
        """End the step :meth:`finish_step` finishes.

        Raises:
            SyncError: no step was started, or it ended already.
        """
        if self._fired is None:
            raise SyncError(f"{type(self).__name__}.finish_step() without start_step()")
        self._end_step()

    def abandon_step(self) -> None:
        """The step ends unfinished: gradients are refused until the next ``start_step``."""
        self._end_step()
        super().abandon_step()
