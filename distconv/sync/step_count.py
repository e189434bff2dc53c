"""The step count's part of the sync contract (:class:`~distconv.sync.base.SyncStrategy`, a
base of it): which of the run's steps the next one is (:meth:`StepCount.start_at`), how many
examples this rank gives the step under way (:meth:`StepCount.start_step`, read back as
:attr:`StepCount.step_examples`), and the checks that each is a count."""

from __future__ import annotations

from collections.abc import Callable

from distconv.fired_writes import let_go_of
from distconv.kernels.shape import is_int
from distconv.sync.errors import SyncError


class StepCount:
    """The step count of :class:`~distconv.sync.base.SyncStrategy` (a base before ``ABC``).

    It sets ``_examples`` and ``_stepped``, which ``SyncStrategy.__init__`` sets up (no
    ``start_step`` yet), and begins the step's record of gradients taken (``_taken``,
    ``_taken_unfinished``: :mod:`distconv.sync.closing`).
    """

    _examples: int
    _stepped: bool
    _taken: set[int] | None
    _taken_unfinished: set[int] | None
    check_made: Callable[[], None]  # the contract's (annotated only: not shadowed here)
    #: whether a setup was called, and whether the last one completed (any class's: the
    #: wrapper :func:`~distconv.sync.closing.sets_up` says so); only a completed one lets a
    #: step start
    _setup_called = False
    _setup_completed = False
    #: the run's step the next start_step begins (:meth:`start_at`'s, else counted from 0),
    #: and the one under way (or the last): what a close mid-step names
    _next_step = 0
    _step_number = 0

    def start_at(self, step: int) -> None:
        """The run's step the next :meth:`start_step` follows (0 first in a fresh run, the
        checkpoint's on a resume). The Trainer calls it on every rank alike right before each
        :meth:`start_step`: a step every rank skips (a sequence set's of no row) has none but
        counts in the run; a transport that numbers its steps (in its errors, its servers' logs
        and files) takes it, so they say the run's steps. Default: nothing else.

        Raises:
            ValueError: ``step`` is not a count (an int >= 0).
        """
        if not is_int(step) or step < 0:
            raise ValueError(f"start_at: step must be a count (an int >= 0), got {step!r}")
        self._next_step = int(step)

    @property
    def step_examples(self) -> int:
        """This rank's examples in the step under way (or the last), as :meth:`start_step` was
        told: what a strategy of one's own divides its gradient sums by (after summing them
        and this count over the ranks, where there are several). Before any :meth:`start_step`
        a :class:`SyncError` (it was 0: every weight went NaN, with a RuntimeWarning alone)."""
        if not getattr(self, "_stepped", False):
            self.check_made()  # a @dataclass one's: not "no attribute '_stepped'"
            from distconv.sync.base import SyncStrategy  # which imports this module

            own = type(self).start_step is not SyncStrategy.start_step
            why = " (does start_step call super().start_step(examples)?)" * own
            raise SyncError(
                f"{type(self).__name__}.step_examples read before any start_step(examples): "
                f"call it before backward{why}"
            )
        return self._examples

    def start_step(self, examples: int) -> None:
        """A step begins; this rank contributes ``examples`` examples to it (over all passes).

        Raises:
            ValueError: ``examples`` is not a count (an int >= 0): 2.5 was taken as 2, and a
                negative count averaged nothing (the gradients' sum was applied).
            SyncError: no ``setup`` was called, or the last one raised: LocalSync and the
                parameter server took the step and refused its first gradient as "not given to
                setup", as if the parameter list were wrong; MPISync refuses it here too.
        """
        if not is_int(examples) or examples < 0:
            raise ValueError(
                f"start_step: examples must be a count (an int >= 0), got {examples!r}"
            )
        if not self._setup_completed:
            self.check_made()  # a @dataclass one's: its own words
            raise self._not_set_up()
        let_go_of(getattr(self, "params", ()))  # held still by a step that never ended
        self._examples, self._stepped, self._taken = int(examples), True, set()
        self._taken_unfinished = None
        self._step_number, self._next_step = self._next_step, self._next_step + 1

    def _not_set_up(self) -> SyncError:
        """Why ``start_step`` is refused where no setup completed: none was called, or the
        last one raised (its own error named why)."""
        name = type(self).__name__
        if self._setup_called:
            return SyncError(
                f"{name}.start_step called after a setup that raised: a step needs a setup "
                "that completes; fix what its error named and call sync.setup again"
            )
        return SyncError(
            f"{name}.start_step called before setup: call "
            "sync.setup(network.parameters()) once, before the first step"
        )
