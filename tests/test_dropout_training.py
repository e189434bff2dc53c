"""Dropout in training: a run stopped and resumed from its checkpoint ends with the weights of
an uninterrupted one (float64), and ranks of one run drop different entries."""

from __future__ import annotations

import numpy as np

from distconv.init import set_seed
from distconv.layers import Dropout, FullyConnected, SoftmaxCrossEntropy
from distconv.layers.randomness import step_seed
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.sync import create_sync
from distconv.trainer import Trainer
from tests.sync.threaded_sync import ThreadedSync, run_ranks

# 240 training examples in batches of 16: 15 steps per epoch


class Recording(Dropout):
    """A Dropout keeping a copy of each training forward's mask."""

    def _forward(self, x):
        y = super()._forward(x)
        if self.mask is not None:
            self.masks = [*getattr(self, "masks", []), self.mask.copy()]
        return y


def _net(p: float = 0.5, init_seed: int = 0) -> Network:
    set_seed(init_seed)
    net = Network()
    net.add("fc1", FullyConnected(64, 16, act="relu"), "image")
    net.add("drop", Recording(p), "fc1")
    net.add("fc2", FullyConnected(16, 4), "drop")
    net.add("loss", SoftmaxCrossEntropy(), ["fc2", "label"])
    return net


def _trainer(out_dir, *, p=0.5, init_seed=0, sync=None, batch_size=16, **kw):
    sync = sync or create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
    net = _net(p, init_seed)
    return Trainer(net, sync, batch_size, out_dir=out_dir, dtype="float64", progress=False, **kw)


def _weights(trainer):
    return {p.name: p.value.copy() for p in trainer.params}


def test_a_run_resumed_mid_epoch_ends_with_the_weights_of_an_uninterrupted_one(data, tmp_path):
    train, test = data
    whole = _trainer(tmp_path / "whole")
    whole.fit(train, test, epochs=2)
    first = _trainer(tmp_path / "split", checkpoint_every=7)
    first.fit(train, test, epochs=2)
    for m in first.checkpoints.run.manifests():
        if m.step > 21:  # as if killed after step 21, in the middle of epoch 2
            m.path.unlink()
    # a new process: another init seed, which the checkpoint overwrites
    again = _trainer(tmp_path / "split", init_seed=9, checkpoint_every=7)
    assert [r["epoch"] for r in again.fit(train, test, epochs=2, resume=True)] == [2]
    assert len(again.network["drop"].masks) == 30 - 21  # it trained the last 9 steps
    for name, value in _weights(whole).items():
        np.testing.assert_array_equal(_weights(again)[name], value, err_msg=name)
    # the masks mattered: without them the weights are others
    undropped = _trainer(tmp_path / "p0", p=0.0)
    undropped.fit(train, test, epochs=2)
    assert not np.allclose(_weights(undropped)["fc1.weight"], _weights(whole)["fc1.weight"])


def test_two_ranks_of_one_run_drop_different_entries_at_each_step(data):
    train, _ = data

    def body(rank, world):
        sync = ThreadedSync(create_optimizer("sgd", lr=0.1), world, rank)
        t = _trainer(None, sync=sync, batch_size=8, seed=4)
        t.fit(train, epochs=1)
        return t.network["drop"].masks, _weights(t)

    (masks0, w0), (masks1, w1) = run_ranks(2, body)
    assert len(masks0) == len(masks1) == 15
    for step, (m0, m1) in enumerate(zip(masks0, masks1)):
        assert (m0 != m1).mean() > 0.3, step
        for rank, mask in ((0, m0), (1, m1)):
            keep = (
                np.random.default_rng(step_seed(4, rank, step)).random(mask.shape, np.float32)
                >= 0.5
            )
            np.testing.assert_array_equal(mask, keep * 2.0)
    for name, value in w0.items():  # the sync still leaves every rank the same weights
        np.testing.assert_array_equal(w1[name], value, err_msg=name)
