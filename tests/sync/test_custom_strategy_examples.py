"""A strategy of one's own divides its gradient sums by ``step_examples`` (``docs/architecture.md``,
"The sync contract"): read before any ``start_step`` (a loop of one's own that skips it, or an
override of ``start_step`` without ``super()``) it was 0, and the division made every weight
infinite or NaN with nothing but numpy's RuntimeWarning."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError, SyncStrategy


class MeanSGD(SyncStrategy):
    """The docs' recipe: the optimizer on each gradient sum over ``step_examples``."""

    def __init__(self) -> None:
        super().__init__(create_optimizer("sgd", lr=0.1))
        self.state: dict = {}

    def init_state(self) -> None:
        for p in self.params:
            self.state.setdefault(p.name, self.optimizer.init_state(p.value))

    def on_gradient(self, param: Parameter) -> None:
        grad = param.grad / self.step_examples
        self.optimizer.update(param.value, grad, self.state[param.name])
        param.grad[...] = 0

    def finish_step(self) -> None:
        """Nothing in flight."""

    def state_dict(self) -> dict:
        return self.state

    def load_state_dict(self, state) -> None:
        """Nothing to restore in these tests."""


class SkipsSuperStartStep(MeanSGD):
    def start_step(self, examples: int) -> None:
        self.started = examples  # no super().start_step(examples)


def _set_up(sync: SyncStrategy) -> Parameter:
    w = Parameter("w", np.ones(3, np.float32))
    sync.setup([w])
    w.grad[...] = 2.0
    return w


@pytest.mark.parametrize("sync_class", [MeanSGD, SkipsSuperStartStep])
def test_step_examples_before_any_start_step_is_refused_not_a_division_by_zero(sync_class):
    sync = sync_class()
    w = _set_up(sync)
    if sync_class is SkipsSuperStartStep:
        sync.start_step(4)
    with pytest.raises(SyncError, match=r"step_examples read before any start_step") as err:
        sync.on_gradient(w)
    assert ("super().start_step(examples)" in str(err.value)) == (sync_class is not MeanSGD)
    assert np.array_equal(w.value, np.ones(3, np.float32)), "no update, no NaN"


def test_step_examples_is_the_count_of_the_step_under_way_or_the_last():
    sync = MeanSGD()
    w = _set_up(sync)
    sync.start_step(4)
    sync.on_gradient(w)
    sync.finish_step()
    assert sync.step_examples == 4
    np.testing.assert_allclose(w.value, 1 - 0.1 * 2.0 / 4)
