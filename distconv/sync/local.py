"""Single process: apply the optimizer the moment a gradient is complete."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, cast

from distconv.backend import copy_into
from distconv.held_updates import UpdateHold
from distconv.layers.written_rows import (
    CHECK_ROWS_VARIABLE,
    close_rows,
    not_noted,
    open_rows,
    take_rows,
    unnoted_rows,
)
from distconv.messages import env_switch
from distconv.optim import Optimizer, mean_scale
from distconv.parameter import Parameter
from distconv.short_lists import short_list
from distconv.sync.base import PER_ROW, StateDict, SyncError, SyncStrategy, step_refusal
from distconv.sync.local_state import (  # noqa: F401  (the parameter server imports them here)
    RUNS,
    _copy_state,
    is_count,
    not_counts,
    not_numbers,
    per_row_count,
    state_problems,
)
from distconv.sync.other_model import ANOTHER_MODELS

log = logging.getLogger("distconv.sync")


class LocalSync(SyncStrategy):
    """World size 1: apply ``optimizer`` to each gradient averaged over the step, then clear it.

    The gradient arrives as a sum over the step's examples; the optimizer averages it inside
    its own arithmetic (``grad_scale``, see :func:`~distconv.optim.mean_scale` and
    :meth:`~distconv.optim.Optimizer.update` for what that costs each rule).

    Updating during backward is safe: a parameter fires only after every layer that uses it has
    finished with it, and layers below never read it.

    Args:
        optimizer: the update rule, run here on each parameter.

    Attributes:
        state: optimizer state per parameter name (what checkpoints save).
    """

    fired_gradients_untouched = True  # p.grad written in its callback only (fired_writes)

    def __init__(self, optimizer: Optimizer) -> None:
        super().__init__(optimizer, rank=0, world_size=1)
        self.state: StateDict = {}
        # the parameter each state was made for, weakly: a model dropped from this sync (a
        # sweep's last one) is freed, and its state with it at the next setup
        self._state_of: dict[str, weakref.ref[Parameter]] = {}
        #: the optimizer that state was made by: another one given since starts afresh
        self._state_by: Optimizer | None = None
        #: ids of the parameters whose update the step under way completed (one that raised
        #: is not among them)
        self._updated: set[int] = set()
        #: ids of the parameters frozen when the step under way began: none of them fires in
        #: it, and one unfrozen in it (after backward passed it) is not waited for
        self._frozen_at_start: set[int] = set()
        #: the parameter whose update raised in the step under way (begun, maybe in part)
        self._raised_in: str | None = None
        #: a step abandoned after its first update (each parameter is updated as it fires), as
        #: the refusals say it, until the next setup; None while the parameters hold whole steps
        self._applied_in_part: str | None = None
        self._not_updated = ""  # the names that step left, for applied_in_part
        #: the base's record of the step :meth:`start_step` began (not a base start_step alone)
        self._started: set[int] | None = None
        #: a fit's second Ctrl-C held from the step's first update to its finish_step
        self._hold = UpdateHold()
        #: ids of the sparse tables whose written rows the open step checks against their
        #: notes (:data:`CHECK_ROWS_VARIABLE` set), as a parameter server's push would
        self._noting: dict[int, Parameter] = {}

    def setup(
        self,
        params: Sequence[Parameter],
        config: Mapping[str, Any] | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """:meth:`~distconv.sync.base.SyncStrategy.setup`, which also ends a step left open (an
        ``abandon_step`` overridden without ``super()``): the next setup clears what an
        abandoned step left, and every ``fit`` calls it."""
        part, self._applied_in_part = self.applied_in_part, None
        self._hold.drop()
        super().setup(params, config, state)
        if part is not None and state is None:  # the caller's values now, trained on: said
            say_setup_takes_part(type(self).__name__, part)

    def init_state(self) -> None:
        """Fresh state for each parameter that has none: a parameter trained again (a second
        fit) keeps its own, and a new parameter of the same name (another model on this sync,
        as in a sweep) never inherits another's moments. A parameter cast or moved since (to
        float64, to the GPU) keeps its state in its new dtype and on its new device. Another
        optimizer given to this sync since (``sync.optimizer = ...``) starts every parameter's
        state afresh, as a new torch optimizer does: its buffers are not the old one's."""
        if self.optimizer is not self._state_by:
            self.state, self._state_of = {}, {}
            self._state_by = self.optimizer
        self._forget_freed()
        for p in self.params:
            made_for = self._state_of.get(p.name)
            fresh = self.optimizer.init_state(p.value)
            if made_for is not None and made_for() is p:
                _copy_state(fresh, self.state[p.name])
            self.state[p.name] = fresh
            self._state_of[p.name] = weakref.ref(p)

    def _forget_freed(self) -> None:
        """Drop the state of parameters nobody holds any more."""
        for name in [n for n, ref in self._state_of.items() if ref() is None]:
            del self._state_of[name], self.state[name]

    def start_step(self, examples: int) -> None:
        """A step begins: gradients are taken from now until :meth:`finish_step`.

        Raises:
            SyncError: the last step is unfinished (no :meth:`finish_step` or
                :meth:`abandon_step` since): its parameters were updated again, unaveraged
                over the two steps' examples, without a word; MPISync refuses it too. Or
                the last step was abandoned after its first update: the parameters hold it
                applied in part, until the next :meth:`setup`.
        """
        if self._taken is not None:  # the base's record; any finish_step of a subclass ends it
            raise unfinished_step_refusal(type(self).__name__)
        self._refuse_part_applied("start_step")
        self._hold.drop()  # a step of its own, never finished (by hand)
        super().start_step(examples)
        self._updated, self._raised_in, self._started = set(), None, self._taken
        self._frozen_at_start = {id(p) for p in self.params if p.static}
        self._stop_noting()
        if env_switch(CHECK_ROWS_VARIABLE):
            self._noting = {id(p): p for p in self.params if p.sparse_rows and not p.static}
        for p in self._noting.values():
            open_rows(p)

    def _stop_noting(self) -> None:
        """Let go of the notes this sync's step opened (not another sync's)."""
        for p in self._noting.values():
            close_rows(p)
        self._noting = {}

    def _refuse_unnoted(self, param: Parameter) -> None:
        """Under :data:`CHECK_ROWS_VARIABLE`, refuse a table's gradient in rows its layers,
        having noted their writes, left out: a parameter server would trust the notes and
        hold those rows back unpushed, so the layer is found without shards."""
        if id(param) not in self._noting:
            return
        noted = take_rows(param)
        open_rows(param)  # the next pass's (a loop of one's own updates at every pass)
        if noted is not None and len(left := unnoted_rows(param.grad, noted)):
            raise SyncError(not_noted(param.name, left))

    def on_gradient(self, param: Parameter) -> None:
        """Apply the optimizer to ``param`` (averaged over the step's examples), then zero its
        gradient.

        Raises:
            SyncError: outside a step (no :meth:`start_step`: the sum was applied unaveraged),
                for a parameter fired twice in the step (updated twice), or for one not given
                to :meth:`setup` (no state, or another parameter's of the same name); under
                :data:`~distconv.layers.written_rows.CHECK_ROWS_VARIABLE`, a sparse table's
                gradient in rows its layers wrote but did not note.
        """
        refusal = self._refusal(param)
        if refusal is not None:
            raise refusal
        self._refuse_unnoted(param)
        scale = mean_scale(self._examples)
        self._hold.begin()  # from here a second Ctrl-C would split the step: held
        try:
            self.optimizer.update(param.value, param.grad, self.state[param.name], grad_scale=scale)
        except BaseException:
            self._raised_in = param.name  # its values or state may be changed already
            raise
        self._updated.add(id(param))
        param.grad[...] = 0

    def _refusal(self, param: Parameter) -> SyncError | None:
        """Why :meth:`on_gradient` cannot take ``param`` (the base's :meth:`check_gradient`,
        which counts it as fired where it may), asking after the calls a subclass overrides;
        None where it can. A parameter given to setup with no state of its own (an
        ``init_state`` overridden without ``super()``) is refused as not given to setup."""
        try:
            self.check_gradient(param)
        except SyncError as refused:
            taken = self._taken
            twice = taken is not None and id(param) in taken  # a backward's, not an override's
            calls = ("start_step",) if taken is None else () if twice else ("setup", "init_state")
            return self._asked(refused, *calls)
        taken = cast("set[int]", self._taken)  # in a step (check_gradient passed): its record
        if taken is not self._started:  # begun by the base's start_step, not this one's
            taken.discard(id(param))
            return self._asked(step_refusal(param.name, False), "start_step")
        if self._state_of.get(param.name, _gone)() is param:
            return None
        taken.discard(id(param))
        whose = ANOTHER_MODELS * (param.name in self._state_of)
        return self._asked(
            step_refusal(param.name, True, False, whose=whose), "setup", "init_state"
        )

    def _asked(self, refusal: SyncError, *calls: str) -> SyncError:
        """``refusal``, asking whether each of ``calls`` a subclass overrides calls LocalSync's
        own: one that skips it leaves the step's bookkeeping undone, and the refusal named a
        call the script had made ("call start_step(examples)", after a start_step of its own)."""
        mine = [c for c in calls if getattr(type(self), c) is not getattr(LocalSync, c)]
        if not mine or self.closed:
            return refusal
        own, supers = (" and ".join(f"{p}{c}()" for c in mine) for p in ("", "super()."))
        return SyncError(
            f"{refusal} ({type(self).__name__} overrides {own}: does it call {supers}?)"
        )

    def finish_step(self) -> None:
        """Nothing is in flight in a single process: the step ends.

        Raises:
            SyncError: no step was started (:meth:`start_step`), or it ended already.
        """
        if self._taken is None:  # the base's wrapper ends the step once this returns
            raise SyncError(f"{type(self).__name__}.finish_step() without start_step()")
        self._hold.end()  # every update made: a Ctrl-C held over them is raised
        self._stop_noting()

    def abandon_step(self) -> None:
        """The step ends unfinished: gradients are refused until the next :meth:`start_step`.
        Where a parameter fired already, its update is made (or was begun, where the optimizer
        raised), the later ones not: ``start_step`` and the state are refused until the next
        :meth:`setup`. A step abandoned before its first gradient left the last whole step,
        and one abandoned after every parameter's update (a second pass fired them again)
        a whole step too: neither is refused."""
        self._hold.drop()
        self._stop_noting()
        if (part := self._part_applied()) is not None:
            self._applied_in_part = f"after a step abandoned after updating {part}"
            left = [p.name for p in self.params if not p.static and id(p) not in self._updated]
            self._not_updated = f"{short_list(left, 4)} not updated" if left else ""

    @property
    def applied_in_part(self) -> str | None:
        """What the parameters hold where the last step was abandoned after some of its
        updates and before the others (``after a step abandoned after updating 4 of 8
        parameters ...``, naming those not updated), until the next :meth:`setup`; None
        while they hold a whole step."""
        if self._applied_in_part is None or not self._not_updated:
            return self._applied_in_part
        return f"{self._applied_in_part}; {self._not_updated}"

    def close(self) -> None:
        """End the step under way, if any: a gradient after close is refused, not applied."""
        self._taken = None  # not abandon_step: a subclass's hook is for a step that raised
        self._hold.drop()
        self._stop_noting()

    def state_dict(self) -> StateDict:
        """The optimizer state by parameter name, the buffers themselves (not copies).

        Raises:
            SyncError: the parameters hold a step applied in part: in a step after its first
                update, or after such a step was abandoned, until the next :meth:`setup` (a
                checkpoint of it would resume from no step). MPISync refuses it too.
        """
        self._refuse_part_applied("state_dict")
        return self.state

    def _part_applied(self) -> str | None:
        """``N of M parameters`` where the step under way began updating some but did not
        update all of them (an update that raised counts as begun, not made, and is named:
        ``0 of 8`` alone reads as nothing applied), else None.

        A parameter frozen since setup (``set_static``) never fires: a step that updated every
        other one is whole. One frozen in the step after its update is neither waited for nor
        lost, and one unfrozen in it (frozen when it began) not waited for: the step is whole
        when every parameter that trained at its start and trains now is among those updated,
        and M counts those and any other updated. A step whose ``finish_step`` raised (an
        update of its own there) is asked about by the ``abandon_step`` after it, though
        the base's wrapper ended it."""
        taken = self._taken if self._taken is not None else self._taken_unfinished
        if not taken:
            return None
        updated = self._updated
        frozen = self._frozen_at_start
        left = [
            p for p in self.params if not p.static and id(p) not in updated and id(p) not in frozen
        ]
        if not left and self._raised_in is None:
            return None
        part = f"{len(updated)} of {len(updated) + len(left)} parameters"
        if self._raised_in is not None:
            part += f" and raising in the update of {self._raised_in!r}"
        return part

    def _refuse_part_applied(self, call: str) -> None:
        """Raise where the parameters hold a step applied in part (see :meth:`state_dict`)."""
        if (part := self._part_applied()) is not None:
            what = f"in a step that updated {part}"
        elif (what := self._applied_in_part) is None:
            return
        raise SyncError(
            f"{type(self).__name__}.{call}() {what}: the parameters and optimizer state "
            "hold that step applied in part, which no step or checkpoint may start from; "
            "restore a checkpoint (fit(resume=...)), or set up again (a fit does) to train on "
            "from these values"
        )

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        """Copy ``state`` into the existing buffers, on their device and in their dtype.

        Per-row counts of a parameter-server checkpoint (keys ending in :data:`PER_ROW`) have
        no buffer here and are skipped: a whole table keeps the scalar (the largest count).
        A parameter or key ``state`` lacks keeps its state (a frozen parameter's is not saved).

        Raises:
            ValueError: ``state`` names a parameter or key that has no buffer here (per-row
                counts of a count this optimizer does not keep too), or gives one of another
                shape or no numbers, or a count (Adam's ``step``) that is no whole number from
                0 to int64's largest; the message lists each, and nothing is copied.
        """
        problems = state_problems(self.state, state)
        if problems:
            raise ValueError(f"{type(self).__name__}.load_state_dict: {'; '.join(problems)}")
        for name, buffers in state.items():
            for key, value in buffers.items():
                if not key.endswith(PER_ROW):
                    copy_into(self.state[name][key], value)


def say_setup_takes_part(owner: str, part: str) -> None:
    """Warn that ``owner``'s setup takes parameters that hold a step applied in part (``part``:
    its ``applied_in_part``) and trains on from them: the next fit's, after a stop that said
    it, where no checkpoint's values replace them (LocalSync's words, and MPISync's)."""
    log.warning(
        "%s.setup() takes parameters that hold a step applied in part (%s) and trains on from "
        "them; fit(resume=True) from a checkpoint, or a model initialised again, goes on from "
        "a whole step instead",
        owner,
        part,
    )


def _gone() -> None:
    """A dead reference's answer, for a parameter with no state at all."""


def unfinished_step_refusal(owner: str) -> SyncError:
    """Why ``owner.start_step()`` is refused inside a step that has not ended (the words of
    LocalSync and of the parameter-server worker, which takes them from here)."""
    return SyncError(
        f"{owner}.start_step() while a step is unfinished: call finish_step() first "
        "(abandon_step() where the step raised)"
    )
