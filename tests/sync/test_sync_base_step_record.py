"""The base's record of the step (``check_gradient``), as strategies built on it use it: what
it keeps alive, and a subclass's gradients handed in by its own ``finish_step``."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

from distconv.optim import SGD
from distconv.parameter import Parameter
from distconv.sync.base import SyncError, SyncStrategy
from distconv.sync.local import LocalSync
from tests.sync.freed_model import freed_by_next_setup
from tests.sync.test_custom_strategy_step_order import Checked


def test_a_setup_lets_go_of_the_last_model_s_parameters():
    """check_gradient's cache of the parameters it knows held the last setup's list, and so
    every parameter of a model dropped from the sync, until the next model's first gradient."""
    first = lambda: Parameter("w", np.ones(3))  # noqa: E731
    assert freed_by_next_setup(Checked(), first, Parameter("v", np.ones(2)))


class AppliesAfterFinish(LocalSync):
    """Keeps each gradient in backward and hands them to LocalSync after its finish_step."""

    def start_step(self, examples: int) -> None:
        super().start_step(examples)
        self.kept: list[tuple[Parameter, np.ndarray]] = []

    def on_gradient(self, param: Parameter) -> None:
        self.kept.append((param, param.grad.copy()))
        param.grad[...] = 0

    def finish_step(self) -> None:
        super().finish_step()
        for param, grad in self.kept:
            param.grad[...] = grad
            super().on_gradient(param)


def test_a_subclass_s_gradients_after_super_finish_step_are_in_its_step():
    """The step ends when the finish_step called returns (the outermost), as for a strategy's
    own finish_step: the inner super().finish_step()'s wrapper ended it, and the kept
    gradients were refused as 'arrived outside a step'."""
    sync, w = AppliesAfterFinish(SGD(lr=0.1)), Parameter("w", np.ones(3))
    sync.setup([w])
    sync.start_step(2)
    w.grad[...] = 1.0
    sync.on_gradient(w)
    sync.finish_step()
    assert np.allclose(w.value, 0.95)
    with pytest.raises(SyncError, match=r"gradient of 'w' arrived outside a step"):
        LocalSync.on_gradient(sync, w)  # and the step is over once finish_step returned


def _failed_after_an_update(
    cls: type[AppliesAfterFinish] = AppliesAfterFinish,
) -> tuple[AppliesAfterFinish, list[Parameter]]:
    """A sync whose finish_step raised after updating w, of w and v, and its parameters."""
    sync = cls(SGD(lr=0.1))
    params = [Parameter("w", np.ones(3)), Parameter("v", np.ones(2))]
    sync.setup(params)
    sync.start_step(2)
    for p in params:
        p.grad[...] = 1.0
        sync.on_gradient(p)
    sync.kept[1] = (params[1], np.ones(5))  # v's update fails: its kept gradient no longer fits
    with pytest.raises(ValueError):
        sync.finish_step()
    return sync, params


def test_a_finish_step_that_raised_after_an_update_leaves_the_step_applied_in_part():
    """Its wrapper ends the step for check_gradient, yet the abandon_step the Trainer calls
    then must learn what the step took: it read the record the wrapper had cleared, and
    state_dict and start_step went on from half a step without a word (LocalSync's _fired
    outlived a finish_step that raised before its own)."""
    sync, (w, v) = _failed_after_an_update()
    with pytest.raises(SyncError, match=r"gradient of 'v' arrived outside a step"):
        LocalSync.on_gradient(sync, v)
    sync.abandon_step()  # as the Trainer does
    for call in (sync.state_dict, lambda: sync.start_step(2)):
        with pytest.raises(SyncError, match=r"abandoned after updating 1 of 2 parameters"):
            call()
    sync.setup([w, v])  # a setup clears it, as after any step abandoned in part
    sync.start_step(2)


def test_a_finish_step_refused_after_one_that_raised_keeps_the_step_applied_in_part():
    """A finish_step called again (a retry) is refused for want of a step; its wrapper, the
    outermost, kept what it took, nothing, over what the one that raised kept: the
    abandon_step after it saw no step, and state_dict went on from half a step."""
    sync, _ = _failed_after_an_update()
    with pytest.raises(SyncError, match=r"finish_step\(\) without start_step\(\)"):
        sync.finish_step()
    sync.abandon_step()
    with pytest.raises(SyncError, match=r"abandoned after updating 1 of 2 parameters"):
        sync.state_dict()


class AbandonFailsOnce(AppliesAfterFinish):
    """Its abandon_step lets go of something of its own before LocalSync's, which fails once."""

    failing = True

    def abandon_step(self) -> None:
        if self.failing:
            self.failing = False
            raise OSError("could not let go")
        super().abandon_step()


def test_an_abandon_step_that_raised_keeps_the_step_applied_in_part():
    """Its wrapper, the outermost, let go of what the finish_step that raised kept, before
    LocalSync's abandon_step had recorded it: state_dict went on from half a step."""
    sync, _ = _failed_after_an_update(AbandonFailsOnce)
    with pytest.raises(OSError):
        sync.abandon_step()
    with pytest.raises(SyncError, match=r"in a step that updated 1 of 2 parameters"):
        sync.state_dict()
    sync.abandon_step()  # again, to the end
    with pytest.raises(SyncError, match=r"abandoned after updating 1 of 2 parameters"):
        sync.state_dict()


class SnapshotInFinish(LocalSync):
    """Keeps a copy of itself made inside its finish_step (a snapshot of the step's end)."""

    def finish_step(self) -> None:
        super().finish_step()
        self.snapshot = copy.copy(self)


def test_a_setup_ends_the_steps_of_a_copy_made_inside_finish_step():
    """The copy holds the finish_step wrapper's flag as set, its finally never run there:
    each finish_step of the copy counted as nested, no step of it ended, and each
    start_step after its first was refused as inside an unfinished step, a setup or not."""
    sync, w = SnapshotInFinish(SGD(lr=0.1)), Parameter("w", np.ones(3))
    sync.setup([w])
    sync.start_step(1)
    sync.finish_step()
    copied = sync.snapshot
    copied.setup([w])
    for _ in range(2):
        copied.start_step(1)
        w.grad[...] = 1.0
        copied.on_gradient(w)
        copied.finish_step()
    assert np.allclose(w.value, 0.8)


class KeepsItsOwnEnding(LocalSync):
    """A user's subclass with an attribute of its own named ``_ending`` (the end of its data)."""

    def start_step(self, examples: int) -> None:
        super().start_step(examples)
        self._ending = True


def test_a_subclass_s_own_ending_attribute_does_not_keep_its_steps_open():
    """The finish_step wrapper's flag was ``_ending``: a subclass's own attribute of that name
    made each finish_step a nested one, no step ended, and the next start_step was refused as
    inside an unfinished step."""
    sync, w = KeepsItsOwnEnding(SGD(lr=0.1)), Parameter("w", np.ones(3))
    sync.setup([w])
    for _ in range(2):
        sync.start_step(1)
        w.grad[...] = 1.0
        sync.on_gradient(w)
        sync.finish_step()
    assert np.allclose(w.value, 0.8) and sync._ending is True


def test_the_split_modules_keep_every_old_import():
    """sync/closing.py's error and refusals moved to sync/errors.py, the closing guards' list
    and wrapper from base.py to closing.py: where transports and tests import them from."""
    from distconv.sync import SyncError as public
    from distconv.sync import base, closing, errors

    assert public is base.SyncError is closing.SyncError is errors.SyncError
    assert base.step_refusal is errors.step_refusal and base.NEEDS_OPEN is closing.NEEDS_OPEN
    assert base.closing_error is closing.closing_error


def test_a_strategy_overriding_call_is_warned_where_it_is_made():
    """The Trainer hands each gradient to on_gradient; a __call__ of one's own (the callback
    before that contract) was passed by without a word, and its work never done."""
    with pytest.warns(UserWarning, match=r"Counting overrides __call__.*on_gradient") as said:

        class Counting(LocalSync):
            def __call__(self, param: Parameter) -> None:
                super().__call__(param)

    assert said[0].filename == __file__  # the class statement, not distconv's own line
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Plain(LocalSync):  # on_gradient's own: no warning
            def on_gradient(self, param: Parameter) -> None:
                super().on_gradient(param)


class _Counts:
    """A mixin whose __call__ counts: the Trainer, handing gradients to on_gradient, skips it."""

    def __call__(self, param: Parameter) -> None:
        self.calls = getattr(self, "calls", 0) + 1


class _Registers(LocalSync):
    """A user's base class that registers its subclasses (an __init_subclass__ of its own)."""

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)


def test_a_call_taken_from_a_mixin_or_under_a_base_of_one_s_own_is_warned_at_its_class():
    """Only a __call__ in the class's own body was warned, so a mixin's went by without a
    word; and one more __init_subclass__ between (a user's base class) moved the warning's
    line into abc's ('<frozen abc>:106'). A subclass of a warned class is not warned again."""
    with pytest.warns(UserWarning, match=r"overrides __call__.*on_gradient") as said:

        class FromMixin(_Counts, LocalSync):
            pass

        class UnderOwnBase(_Registers):
            def __call__(self, param: Parameter) -> None:
                super().__call__(param)

        class Again(FromMixin):
            pass

    assert [str(w.message).split()[0] for w in said] == ["FromMixin", "UnderOwnBase"]
    assert {w.filename for w in said} == {__file__}


class StartsTheBaseStep(LocalSync):
    """Its start_step opens the base's step (as MPISync's does) and skips LocalSync's."""

    def start_step(self, examples: int) -> None:
        SyncStrategy.start_step(self, examples)


def test_a_gradient_in_a_step_local_sync_s_start_step_never_began_is_refused_as_before():
    """Before 7f6e88c0 LocalSync's own record refused it, asking whether start_step calls
    super(); on the base's record it was taken, without the part-applied check at the start
    and with the last step's updates counted as this one's."""
    sync, w = StartsTheBaseStep(SGD(lr=0.1)), Parameter("w", np.ones(3))
    sync.setup([w])
    sync.start_step(2)
    w.grad[...] = 1.0
    with pytest.raises(SyncError, match=r"outside a step.*does it call super\(\)\.start_step"):
        sync.on_gradient(w)
    assert np.array_equal(w.value, np.ones(3)) and not sync._taken
