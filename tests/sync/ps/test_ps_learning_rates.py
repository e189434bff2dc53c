"""A push's learning rate on the parameter server: a NaN or infinite lr is refused and
the weights stay finite; a learning-rate scale of 0 trains as LocalSync and MPISync do. Real shard
processes on 127.0.0.1."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import batches, small_net, train_steps
from ps_helpers import small_block_sync as _sync

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync


@pytest.mark.parametrize("lr", [float("nan"), float("inf")])
def test_a_push_with_a_nan_or_inf_lr_is_refused_and_the_weights_stay_finite(shards, lr):
    endpoints = shards.start(2, workers=1)
    data = batches(3, 4)
    net, sync = small_net(), _sync(endpoints)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, data[:1])
        sync.optimizer.lr = lr  # what a broken schedule would send
        with pytest.raises(SyncError, match=f"lr {lr} is not a finite number"):
            train_steps(net, sync, data[1:2])
        sync.optimizer.lr = 0.05
        for p in net.parameters():  # finish_step raised before it cleared the refused step's
            p.grad[...] = 0
        train_steps(net, sync, data[2:])
    finally:
        sync.close()
    # the refused step changed nothing on the shards: as if only steps 1 and 3 had run
    ref = small_net()
    local = LocalSync(create_optimizer("sgd", lr=0.05))
    local.setup(ref.parameters())
    train_steps(ref, local, [data[0], data[2]])
    for p, q in zip(net.parameters(), ref.parameters()):
        assert np.isfinite(p.value).all()
        np.testing.assert_allclose(p.value, q.value, rtol=1e-10, atol=1e-12)


def test_a_learning_rate_scale_of_0_trains_as_in_the_other_syncs(shards):
    """set_lr_scale(0), which the contract takes (a warm-up's start), sent lr 0 and the shard
    refused the push mid-run ("lr 0.0 not finite and > 0"); LocalSync and MPISync take it:
    Adam's moments move, the weights do not."""
    data = batches(2, 4)
    runs = []
    for sync in (
        LocalSync(create_optimizer("adam", lr=0.05)),
        _sync(shards.start(2, workers=1), optimizer="adam"),
    ):
        net = small_net()
        try:
            sync.setup(net.parameters())
            before = [p.value.copy() for p in net.parameters()]
            sync.set_lr_scale(0)
            train_steps(net, sync, data[:1])
            assert all(np.array_equal(a, p.value) for a, p in zip(before, net.parameters()))
            sync.set_lr_scale(1.0)
            train_steps(net, sync, data[1:])
            runs.append([p.value.copy() for p in net.parameters()])
        finally:
            sync.close()
    for a, b in zip(*runs):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
