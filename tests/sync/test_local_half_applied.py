"""LocalSync updates each parameter the moment its gradient fires: a step that raises after
its first update (a layer's backward, the optimizer itself) leaves the parameters holding it
applied in part. Its state must not be handed out, nor trained on, until a setup;
a step that raises before any update left the last whole step, which stays valid.

Real training: the float64 LeNet of the MPI tests, Adam, the Trainer on LocalSync."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from distconv.layers.modes import keeps_for_backward
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.mpi.common import small_lenet, trainer_data

#: the step (counting from 0) in which a layer or the optimizer raises
FAILING_STEP = 2
REFUSAL = (
    "LocalSync.{call}() after a step abandoned after updating {updated} of 8 parameters"
    "{raised}: the parameters and optimizer state hold that step applied in part, which no "
    "step or checkpoint may start from; restore a checkpoint (fit(resume=...)), or set up "
    "again (a fit does) to train on from these values"
)


def _trainer(out_dir: Any = None, **kw: Any) -> Trainer:
    """5 steps of 8 (37 examples), Adam, float64: the same run each time."""
    sync = LocalSync(create_optimizer("adam", lr=0.01))
    return Trainer(small_lenet(seed=3), sync, 8, out_dir=out_dir, progress=False, **kw)


def _weights(trainer: Trainer) -> dict[str, np.ndarray]:
    return {p.name: p.value.copy() for p in trainer.params}


def _on_call(n: int, then: Callable[[], None], method: Callable[..., Any]) -> Callable[..., Any]:
    """``method``, but its ``n``-th call (from 1) in a step runs ``then()`` first: fit's
    forwards before the first step (its checks of the data, ``forward_only``) are not steps."""
    calls = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if keeps_for_backward():
            calls[0] += 1
            if calls[0] == n:
                then()
        return method(*args, **kwargs)

    return wrapped


class _Before:
    """The weights and optimizer state at the start of the failing step's forward."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.weights: dict[str, np.ndarray] = {}
        self.state: dict[str, Any] = {}
        layer = trainer.network.layers["conv1"]
        layer.forward = _on_call(FAILING_STEP + 1, self.take, layer.forward)

    def take(self) -> None:
        self.weights = _weights(self.trainer)
        # in the step, before its first update: the state of the last whole step, handed out
        self.state = copy.deepcopy(self.trainer.sync.state_dict())


def _fail(what: str) -> Callable[[], None]:
    def then() -> None:
        raise RuntimeError(what)

    return then


def _assert_state_equal(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    assert ours.keys() == theirs.keys()
    for name in theirs:
        for key in theirs[name]:
            np.testing.assert_array_equal(ours[name][key], theirs[name][key], f"{name}/{key}")


def _assert_refused(sync: LocalSync, updated: int, raised: str = "") -> None:
    """``raised``: the parameter whose update raised, which the refusal names."""
    raised = f" and raising in the update of {raised!r}" if raised else ""
    for call, run in [
        ("state_dict", sync.checkpoint_state),
        ("start_step", lambda: sync.start_step(8)),
    ]:
        with pytest.raises(SyncError) as refused:
            run()
        assert str(refused.value) == REFUSAL.format(call=call, updated=updated, raised=raised)


def test_a_layer_raising_after_the_first_updates_leaves_a_state_refused(tmp_path):
    """conv1, the last layer backward reaches, raises in step 2: fc2, fc1 and conv2 (6 of the
    8 parameters) are updated, conv1 not. checkpoint_state handed that out, and the
    next step trained on from it."""
    t = _trainer(tmp_path / "cut", checkpoint_every=1)
    before = _Before(t)
    layer = t.network.layers["conv1"]
    in_step: list[str] = []

    def refused_in_step_then_fail() -> None:  # a custom loop's save inside the step
        with pytest.raises(SyncError) as refused:
            t.sync.state_dict()
        in_step.append(str(refused.value))
        raise RuntimeError("conv1 fails")

    layer.backward = _on_call(FAILING_STEP + 1, refused_in_step_then_fail, layer.backward)
    with pytest.raises(RuntimeError, match="conv1 fails"):
        t.fit(trainer_data(), epochs=1)
    assert in_step == [
        "LocalSync.state_dict() in a step that updated 6 of 8 parameters: the parameters and "
        + REFUSAL.split(": the parameters and ", 1)[1]
    ]
    now = _weights(t)
    for name, value in before.weights.items():  # the step applied in part, as said
        assert np.array_equal(now[name], value) == name.startswith("conv1."), name
    _assert_refused(t.sync, updated=6)
    # a resume restores the last checkpoint (step 2) and setup takes it: the run ends as one
    # never cut, bitwise, and its state is handed out again
    del layer.backward, layer.forward
    t.fit(trainer_data(), epochs=1, resume=True)
    whole = _trainer(tmp_path / "whole")
    whole.fit(trainer_data(), epochs=1)
    for name, value in _weights(whole).items():
        np.testing.assert_array_equal(_weights(t)[name], value, err_msg=name)
    _assert_state_equal(t.sync.checkpoint_state(), whole.sync.checkpoint_state())


@pytest.mark.parametrize("failing", ["fc1.weight", "fc2.bias"])
def test_an_optimizer_raising_mid_step_leaves_a_state_refused(failing):
    """The optimizer raises on ``failing`` in step 2: the parameters fired before it are
    updated, and its own update was begun (Adam may have moved its moments). fc2.bias fires
    first: '0 of 8 parameters' alone read as nothing applied, so the refusal names it."""
    t = _trainer()
    optimizer, steps = t.sync.optimizer, []
    update = optimizer.update
    param = {p.name: p for p in t.params}[failing]

    def fails(value: Any, grad: Any, state: Any, grad_scale: float = 1.0) -> None:
        if value is param.value and len(steps) == FAILING_STEP:
            raise FloatingPointError(f"the optimizer fails on {failing}")
        if value is param.value:
            steps.append(1)
        update(value, grad, state, grad_scale=grad_scale)

    optimizer.update = fails
    with pytest.raises(FloatingPointError):
        t.fit(trainer_data(), epochs=1)
    fired = t.network.firing_order
    _assert_refused(t.sync, updated=fired.index(failing), raised=failing)
    # a second fit sets up again: no refusal, it trains on from these values, as documented
    optimizer.update = update
    t.fit(trainer_data(), epochs=1)
    assert set(t.sync.checkpoint_state()) == {p.name for p in t.params}


@pytest.mark.parametrize("method", ["forward", "backward"])
def test_a_step_raising_before_its_first_update_leaves_the_last_whole_step(method):
    """The loss layer (no parameters; the last forward, the first backward) raises in step 2,
    before any gradient fired: nothing was updated, the state of step 1 is handed out as it
    was, and the next step is taken (a second Ctrl-C there is such a step)."""
    t = _trainer()
    before = _Before(t)
    layer = t.network.layers["loss"]
    said = f"loss {method} fails"
    setattr(layer, method, _on_call(FAILING_STEP + 1, _fail(said), getattr(layer, method)))
    with pytest.raises(RuntimeError, match=said):
        t.fit(trainer_data(), epochs=1)
    assert before.state, "the snapshot of step 2's start was taken"
    _assert_state_equal(t.sync.checkpoint_state(), before.state)
    now = _weights(t)
    for name, value in before.weights.items():
        np.testing.assert_array_equal(now[name], value, err_msg=name)
    t.sync.start_step(8)  # taken
    t.sync.abandon_step()
    _assert_state_equal(t.sync.checkpoint_state(), before.state)
