"""The per-step generator layers draw from: a pure function of (seed, rank, step, pass), per
thread, absent in evaluation and prediction; the Trainer enters it for each pass."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.layers.modes import forward_only
from distconv.layers.randomness import step_generator, step_seed, training, training_step
from distconv.optim import create_optimizer
from distconv.sync import create_sync
from distconv.trainer import Trainer
from tests.layers.drawing_layers import Jitter


def _draws(seed, rank, step, pass_=0):
    with training_step(seed, rank, step, pass_):
        return step_generator().random(64)


def test_the_same_key_draws_the_same_numbers_and_any_other_other_numbers():
    first = _draws(3, 1, 7, 1)
    np.testing.assert_array_equal(_draws(3, 1, 7, 1), first)  # a resumed run's step 7
    others = [_draws(4, 1, 7, 1), _draws(3, 0, 7, 1), _draws(3, 1, 8, 1), _draws(3, 1, 7, 0)]
    for other in others:  # seed, rank, step, pass: each alone changes every number
        assert not np.isclose(other, first).any()


def test_the_draws_are_no_other_stream_of_the_same_seed():
    """numpy pads a short entropy list with zeros: without a key of their own, rank 2's draws at
    step 0, pass 0 were the sampler's shuffle stream of epoch 2, ``default_rng([seed, 2])``."""
    assert not np.isclose(_draws(5, 2, 0), np.random.default_rng([5, 2]).random(64)).any()
    assert not np.isclose(_draws(5, 0, 0), np.random.default_rng(5).random(64)).any()
    np.testing.assert_array_equal(
        _draws(5, 2, 0), np.random.default_rng(step_seed(5, 2, 0)).random(64)
    )


def test_outside_a_step_and_inside_forward_only_nothing_trains():
    assert not training()
    with pytest.raises(RuntimeError, match=r"outside a training step .* ask .*training\(\) first"):
        step_generator()
    with training_step(0, 0, 0):
        assert training()
        with forward_only():  # an evaluation inside a step: nothing drawn
            assert not training()
            with pytest.raises(RuntimeError):
                step_generator()
        assert training()
    assert not training()


def test_a_nested_step_gives_back_the_outer_one():
    with training_step(0, 0, 0) as outer:
        with training_step(0, 0, 1) as inner:
            assert step_generator() is inner
        assert step_generator() is outer


def test_each_thread_has_its_own_step():
    """Ranks may run as threads of one process: one rank's step is no other's."""
    inside, seen = threading.Barrier(2, timeout=10), {}

    def other_rank():
        inside.wait()  # while the main thread trains
        seen["training"] = training()
        with training_step(9, 1, 0):
            seen["numbers"] = step_generator().random(4)
        inside.wait()

    thread = threading.Thread(target=other_rank)
    thread.start()
    with training_step(9, 0, 0):
        inside.wait()
        inside.wait()
        mine = step_generator().random(4)
    thread.join(10)
    assert seen["training"] is False
    np.testing.assert_array_equal(mine, _draws(9, 0, 0)[:4])  # the other thread drew nothing of it
    np.testing.assert_array_equal(seen["numbers"], _draws(9, 1, 0)[:4])


def _jitter_net() -> Network:
    net = Network()
    net.add("fc", FullyConnected(4, 3, dtype=np.float64), "x")
    net.add("jitter", Jitter(), "fc")
    net.add("loss", SoftmaxCrossEntropy(), ["jitter", "label"])
    return net


def test_the_trainer_draws_each_pass_from_its_seed_rank_step_and_pass():
    """2 epochs of 3 steps of 2 passes of 2 examples: the layer draws, in training only, the
    numbers of (seed, rank 0, steps done in the run, pass), counted across the epochs (steps in
    the epoch drew the first epoch's numbers again in the second); the test-set check and the
    evaluations draw nothing."""
    rng = np.random.default_rng(0)
    data = {"x": rng.standard_normal((12, 4)), "label": np.arange(12) % 3}
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.1))
    net = _jitter_net()
    trainer = Trainer(net, sync, 2, accumulate=2, seed=5, progress=False)
    trainer.fit(data, data, epochs=2)
    drawn = net["jitter"].drawn
    trained = [n for n in drawn if n is not None]
    assert len(trained) == 12 and len(drawn) > 12  # every pass trained; evaluation did not
    expected = [
        np.random.default_rng(step_seed(5, 0, step, k)).standard_normal((2, 3))
        for step in range(6)
        for k in range(2)
    ]
    assert len(expected) == len(trained)
    for got, want in zip(trained, expected):
        np.testing.assert_array_equal(got, want)
    net.forward({"x": Arg(data["x"], needs_grad=False), "label": Arg(ids=data["label"])})
    assert drawn[-1] is None  # a prediction after training: the identity
