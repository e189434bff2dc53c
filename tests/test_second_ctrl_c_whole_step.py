"""A second Ctrl-C during a fit never leaves the weights part-way through a step, and where
something else did (an interrupt raised by a layer itself), the fit, evaluate and the next
setup say so.

Real signals, sent by the process to itself in the middle of a step's updates (or from a timer
thread, as a person's two quick Ctrl-Cs); the weights are compared with those recorded at
every step boundary, by the Trainer's count of steps.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from distconv.data import split, synthetic
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.resume import Preempted
from distconv.sync.errors import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.trainer import Trainer
from tests.mpi.common import small_lenet, trainer_data
from tests.sigint_fixture import python_handles_sigint  # noqa: F401 (autouse)

#: the step (from 0) whose updates the second Ctrl-C lands in, and after which update
STEP, UPDATE = 2, 4
SYNCS: dict[str, Callable[[], Any]] = {
    "local": lambda: LocalSync(create_optimizer("adam", lr=0.01)),
    "mpi": lambda: MPISync(create_optimizer("adam", lr=0.01), comm=SingleRankComm()),
}


def _weights(t: Trainer) -> dict[str, np.ndarray]:
    return {p.name: p.value.copy() for p in t.params}


def _record_boundaries(t: Trainer) -> list[dict[str, np.ndarray]]:
    """The weights at each step boundary, as each ``finish_step`` returns (index: steps
    finished), recorded apart from the Trainer's count of them."""
    boundaries = [_weights(t)]
    finish = t.sync.finish_step

    def recorded() -> None:
        finish()
        boundaries.append(_weights(t))

    t.sync.finish_step = recorded
    return boundaries


def _assert_at_its_step(t: Trainer, boundaries: list[dict[str, np.ndarray]]) -> None:
    """The weights are those of the step boundary the Trainer counts them at."""
    now = _weights(t)
    assert len(boundaries) == t.pos.step + 1, "the steps finished are not those counted"
    expected = boundaries[t.pos.step]
    differing = [n for n in now if not np.array_equal(now[n], expected[n])]
    assert not differing, f"after step {t.pos.step} these differ: {differing}"


@pytest.mark.parametrize("kind", sorted(SYNCS))
def test_a_second_ctrl_c_in_the_update_loop_is_raised_once_the_step_is_whole(kind, caplog):
    t = Trainer(small_lenet(seed=3), SYNCS[kind](), 8, progress=False)
    boundaries = _record_boundaries(t)
    optimizer = t.sync.optimizer
    update, calls = optimizer.update, [0]
    per_step = len(t.params)

    def two_ctrl_cs_mid_step(*args: Any, **kwargs: Any) -> None:
        update(*args, **kwargs)
        calls[0] += 1
        if calls[0] == STEP * per_step + UPDATE:  # as a person's two Ctrl-Cs land
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)

    optimizer.update = two_ctrl_cs_mid_step
    try:
        with pytest.raises(KeyboardInterrupt):
            t.fit(trainer_data(), epochs=1)
    finally:
        t.sync.close()
    assert t.pos.step == STEP + 1  # the step finished and was counted before it stopped
    _assert_at_its_step(t, boundaries)
    assert "applied in part" not in caplog.text


@pytest.mark.parametrize("kind", sorted(SYNCS))
def test_a_third_ctrl_c_stops_an_update_that_does_not_end_at_once(kind, capfd):
    """An update stuck (a slow or hung optimizer, as a layer's backward after LocalSync's
    first update): the second Ctrl-C is held and says so, and the third stops at once, not
    when (if ever) the update ends."""
    t = Trainer(small_lenet(seed=3), SYNCS[kind](), 8, progress=False)
    optimizer = t.sync.optimizer
    update, calls, stuck = optimizer.update, [0], 30.0

    def stuck_mid_step(*args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] == STEP * len(t.params) + UPDATE:
            for _ in range(3):  # a person's three Ctrl-Cs, each handled before the next
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)
            end = time.monotonic() + stuck
            while time.monotonic() < end:  # stuck in Python, where a handler runs
                time.sleep(0.01)
        update(*args, **kwargs)

    optimizer.update = stuck_mid_step
    began = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            t.fit(trainer_data(), epochs=1)
    finally:
        t.sync.close()
    assert time.monotonic() - began < stuck / 3  # the third one's, not the update's end
    assert t.pos.step == STEP  # not counted: the step was cut
    said = capfd.readouterr().err
    assert "Ctrl-C again: stopping once this step's updates are all made" in said
    assert "Ctrl-C a third time stops at once, maybe with the step applied in part" in said


def test_an_interrupt_a_layer_raises_mid_step_is_said_at_the_stop_evaluate_and_next_fit(caplog):
    """Not a signal (a layer's own KeyboardInterrupt, in backward after 4 of the 8 updates):
    nothing holds it, so the parameters hold the step in part, which is said each time they
    are used, with the way back to a whole step."""
    t = Trainer(small_lenet(seed=3), SYNCS["local"](), 8, progress=False)
    conv2, calls = t.network["conv2"], [0]
    backward = conv2.backward

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == STEP + 1:
            raise KeyboardInterrupt
        return backward(*args, **kwargs)

    conv2.backward = interrupted
    with caplog.at_level(logging.WARNING), pytest.raises(KeyboardInterrupt):
        t.fit(trainer_data(), epochs=1)
    said = (
        "step 3 applied in part (after a step abandoned after updating 4 of 8 parameters; "
        "conv1.weight, conv1.bias, conv2.weight, conv2.bias not updated): the weights belong to "
        "no step; fit(resume=True) goes on from the last checkpoint (with out_dir), or "
        "initialise the model again"
    )
    assert f"the fit stopped with {said}" in caplog.text
    caplog.clear()
    t.evaluate(trainer_data())
    assert f"evaluate() scores {said}" in caplog.text
    caplog.clear()
    del conv2.backward
    t.fit(trainer_data(), epochs=1)
    assert "LocalSync.setup() takes parameters that hold a step applied in part" in caplog.text
    caplog.clear()
    t.evaluate(trainer_data())  # trained on since: whole steps, nothing to say
    assert "applied in part" not in caplog.text


@pytest.mark.parametrize("kind", sorted(SYNCS))
def test_an_optimizer_error_mid_step_is_said_at_the_stop_evaluate_and_next_fit(kind, caplog):
    """An update that raises (not an interrupt: nothing holds it) leaves the buckets or
    parameters before it updated: MPISync's words too, not LocalSync's alone."""
    t = Trainer(small_lenet(seed=3), SYNCS[kind](), 8, progress=False)
    optimizer = t.sync.optimizer
    update, calls = optimizer.update, [0]

    def failing_mid_step(*args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] == STEP * len(t.params) + UPDATE:
            raise FloatingPointError("the optimizer fails")
        update(*args, **kwargs)

    optimizer.update = failing_mid_step
    with caplog.at_level(logging.WARNING), pytest.raises(FloatingPointError):
        t.fit(trainer_data(), epochs=1)
    assert "the fit stopped with step 3 applied in part (" in caplog.text
    caplog.clear()
    # MPISync's ranks meet between steps only: its evaluate is refused until a setup
    mpi = pytest.raises(SyncError, match="the ranks meet between steps, not in step 2")
    with mpi if kind == "mpi" else contextlib.nullcontext():
        t.evaluate(trainer_data())
    assert "evaluate() scores step 3 applied in part (" in caplog.text
    caplog.clear()
    del optimizer.update
    try:
        with caplog.at_level(logging.WARNING):
            t.fit(trainer_data(), epochs=1)
    finally:
        t.sync.close()
    setup = f"{type(t.sync).__name__}.setup() takes parameters that hold a step applied in part"
    assert setup in caplog.text


@pytest.fixture(scope="module")
def larger_data():
    return split(synthetic(n=2048, seed=0), 0.25, 0)[0]


def test_two_quick_ctrl_cs_from_a_timer_leave_the_weights_at_a_counted_step(larger_data):
    """Two SIGINTs 1 ms apart from another thread, at four times within a real fit, as a
    person's; each leaves the weights at the boundary of the step the Trainer counts."""
    set_seed(0)
    net = lenet((1, 8, 8), 4, channels=(32, 64), hidden=128)
    kinds: list[str] = []
    for trial in range(4):  # a Trainer each: its count and the boundaries from 0
        t = Trainer(net, SYNCS["local"](), 64, dtype=np.float64, progress=False)
        boundaries = _record_boundaries(t)
        timer = threading.Thread(target=_two_sigints, args=(0.3 + 0.137 * trial, 0.001))
        timer.start()
        stopped: list[BaseException] = []
        try:  # far more epochs than it runs: the Ctrl-Cs end it (the first alone, maybe)
            t.fit(larger_data, epochs=100)
        except (KeyboardInterrupt, Preempted) as stop:
            stopped.append(stop)
        finally:
            _join_through_ctrl_c(timer)
        assert stopped
        kinds.append(type(stopped[0]).__name__)
        _assert_at_its_step(t, boundaries)
    assert "KeyboardInterrupt" in kinds, kinds  # the second Ctrl-C landed in a step


def _join_through_ctrl_c(timer: threading.Thread) -> None:
    """Wait for ``timer``: a second SIGINT after the fit ended (a Preempted by the first) is
    Python's own KeyboardInterrupt, not this test's failure."""
    while timer.is_alive():
        try:
            timer.join(10)
        except KeyboardInterrupt:
            pass


def _two_sigints(delay: float, gap: float) -> None:
    threading.Event().wait(delay)
    os.kill(os.getpid(), signal.SIGINT)
    threading.Event().wait(gap)
    os.kill(os.getpid(), signal.SIGINT)
