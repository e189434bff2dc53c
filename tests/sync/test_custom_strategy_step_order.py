"""A strategy of one's own gets the step-order refusals LocalSync, MPISync and the parameter
server's worker make, by calling ``check_gradient(param)`` first in its ``on_gradient``: before,
it had to keep the step's state itself, and one that did not applied a gradient handed in twice
twice, one outside a step (after ``finish_step``, ``abandon_step`` or ``close``) unaveraged, and
another model's of the same name with this one's state, each without a word."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss
from distconv.optim import SGD
from distconv.parameter import Parameter
from distconv.sync.base import SyncError, SyncStrategy


class Checked(SyncStrategy):
    """Plain SGD on each gradient as it comes, after the base's order check."""

    def __init__(self) -> None:
        super().__init__(SGD(lr=0.1))

    def on_gradient(self, param: Parameter) -> None:
        self.check_gradient(param)
        param.value -= 0.1 * param.grad / self.step_examples
        param.grad[...] = 0

    def finish_step(self) -> None:
        """Nothing in flight."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state) -> None:
        """SGD keeps no state."""


def _set_up() -> tuple[Checked, Parameter]:
    sync, w = Checked(), Parameter("w", np.ones(3))
    sync.setup([w])
    w.grad[...] = 1.0
    return sync, w


def _after_finish(sync: Checked, w: Parameter) -> None:
    sync.start_step(2)
    sync.finish_step()


def _after_abandon(sync: Checked, w: Parameter) -> None:
    sync.start_step(2)
    sync.abandon_step()


def _after_close(sync: Checked, w: Parameter) -> None:
    sync.start_step(2)
    with pytest.raises(SyncError, match=r"closed in the middle of step"):
        sync.close()  # a step left open: refused, yet closed all the same


def _after_setup(sync: Checked, w: Parameter) -> None:
    sync.start_step(2)  # a step left open (a script's backward raised): setup lets go of it
    sync.setup([w])
    w.grad[...] = 1.0


def _twice(sync: Checked, w: Parameter) -> None:
    sync.start_step(2)
    sync.on_gradient(w)
    w.grad[...] = 1.0


def _another_model_s(sync: Checked, w: Parameter) -> Parameter:
    sync.start_step(2)
    other = Parameter("w", np.ones(3))
    other.grad[...] = 1.0
    return other


@pytest.mark.parametrize(
    "before, words",
    [
        (lambda s, w: None, r"gradient of 'w' arrived outside a step: call start_step"),
        (_after_finish, r"gradient of 'w' arrived outside a step"),
        (_after_abandon, r"gradient of 'w' arrived outside a step"),
        (_after_close, r"gradient of 'w' arrived after close\(\)"),
        (_after_setup, r"gradient of 'w' arrived outside a step"),
        (_twice, r"parameter 'w' fired twice in one step"),
        (
            _another_model_s,
            r"'w', which was not given to setup \(a parameter of that name was: another model's\)",
        ),
    ],
)
def test_a_gradient_out_of_the_step_s_order_is_refused_and_changes_nothing(before, words):
    sync, w = _set_up()
    handed = before(sync, w) or w
    kept = w.value.copy()
    with pytest.raises(SyncError, match=words):
        sync.on_gradient(handed)
    assert np.array_equal(w.value, kept)


def test_a_checked_strategy_trains_with_the_trainer_as_before():
    rng = np.random.default_rng(0)
    set_seed(0)  # the initial weights: drawn from the process's stream, they vary with the tests
    net = Network()  # run before in the worker, and from some the loss did not fall
    net.add("fc", FullyConnected(3, 1, dtype=np.float64), "x")
    net.add("loss", MSELoss(), ["fc", "target"])
    data = {"x": rng.standard_normal((16, 3)), "target": rng.standard_normal((16, 1))}
    history = Trainer(net, Checked(), batch_size=4, accuracy=None).fit(data, epochs=3)
    assert history[-1]["train_loss"] < history[0]["train_loss"]


class FillsUnfired(Checked):
    """Hands itself, in finish_step, a zero gradient for each parameter no backward fired (as
    a strategy that must reduce every parameter each step does)."""

    def finish_step(self) -> None:
        for p in self.params:
            if id(p) not in self._taken:
                self.on_gradient(p)


def test_a_finish_step_handing_itself_the_unfired_gradients_is_still_in_the_step():
    sync, w, v = FillsUnfired(), Parameter("w", np.ones(3)), Parameter("v", np.ones(2))
    sync.setup([w, v])
    sync.start_step(2)
    w.grad[...] = 1.0
    sync.on_gradient(w)
    sync.finish_step()  # v's zero gradient: refused as "outside a step" when it ended first
    assert np.allclose(w.value, 0.95) and np.array_equal(v.value, np.ones(2))
    with pytest.raises(SyncError, match=r"gradient of 'w' arrived outside a step"):
        sync.on_gradient(w)  # and the step is over once finish_step returned


class DropsOnAbandon(Checked):
    """Its abandon_step and barrier are helpers of other names (``abandon_step = _drop``)."""

    def _drop(self) -> None:
        self.dropped = True

    def _wait(self) -> None:
        """One rank: nobody to wait for."""

    abandon_step, barrier = _drop, _wait


def test_an_abandon_step_of_another_name_is_still_served_after_close():
    """The wrappers took the call's name from the function's, so ``abandon_step = _drop`` was
    guarded as a finish_step: refused after close ('_drop() called after close()'), which
    abandon_step never is; and a refused barrier was named '_wait()'. A close with the step
    open is refused (closed all the same); the abandon_step after it is still served."""
    sync = DropsOnAbandon()
    sync.setup([Parameter("w", np.ones(3))])
    sync.start_step(2)
    with pytest.raises(SyncError, match=r"closed in the middle of step"):
        sync.close()
    assert sync.closed and not hasattr(sync, "dropped")
    sync.abandon_step()
    assert sync.dropped
    with pytest.raises(SyncError, match=r"DropsOnAbandon\.barrier\(\) called after close"):
        sync.barrier()


class FailsToFinish(Checked):
    """Its finish_step and abandon_step raise, as a transport's may (a peer gone, a Ctrl-C)."""

    def finish_step(self) -> None:
        raise SyncError("a peer is gone")

    def abandon_step(self) -> None:
        raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("end", "raised"), [("finish_step", SyncError), ("abandon_step", KeyboardInterrupt)]
)
def test_a_step_whose_end_raised_is_over_for_check_gradient(end, raised):
    """The step ends once the body returned or raised: no test asked for the second, and with
    _taken cleared after a returning body alone a gradient was taken after the failed end."""
    sync, w = FailsToFinish(), Parameter("w", np.ones(3))
    sync.setup([w])
    sync.start_step(2)
    w.grad[...] = 1.0
    with pytest.raises(raised):
        getattr(sync, end)()
    with pytest.raises(SyncError, match=r"gradient of 'w' arrived outside a step"):
        sync.on_gradient(w)
    assert np.array_equal(w.value, np.ones(3))
