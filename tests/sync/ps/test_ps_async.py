"""Async mode: two workers learn the digits; stale pushes are dropped (a silent worker's fate:
``test_ps_liveness.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import batches, run_ranks, small_net, train_steps

from distconv.arg import Arg
from distconv.data import batches as data_batches
from distconv.data import load_digits
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync


def _sync(endpoints, rank=0, world=1, optimizer="sgd", lr=0.05, **kw):
    kw.setdefault("timeout", 20)
    return PServerSync(create_optimizer(optimizer, lr=lr), rank=rank, world_size=world,
                       pservers=endpoints, insecure=True, **kw)  # fmt: skip


def _accuracy(net, data) -> float:
    out = net.forward({"image": Arg(data.x, needs_grad=False),
                       "label": Arg(ids=data.y, needs_grad=False)})  # fmt: skip
    return float((out["fc2"].value.argmax(axis=1) == data.y).mean())


@pytest.mark.timeout(240)
def test_two_async_workers_learn_the_digits(shards):
    train, test = load_digits()
    endpoints = shards.start(2, workers=2, mode="async", extra=["--max-staleness", "8"])
    nets = []
    for rank in range(2):
        set_seed(rank)
        nets.append(lenet(train.image_shape, 10, channels=(4, 8), hidden=32))
    chance_before = _accuracy(nets[0], test)

    def rank_fn(rank):
        net, sync = nets[rank], _sync(endpoints, rank, 2, "adam", 0.01, block_bytes=4096)
        try:
            sync.setup(net.parameters(), {"data": "digits"})
            assert sync.mode == "async"
            for epoch in range(5):
                for x, y in data_batches(train, 32, seed=0, epoch=epoch, shard=(rank, 2)):
                    sync.start_step(len(y))
                    net.forward({"image": Arg(x, needs_grad=False),
                                 "label": Arg(ids=y, needs_grad=False)})  # fmt: skip
                    net.backward(sync, loss="loss", loss_scale=len(y))
                    sync.finish_step()
            sync.barrier()
            sync._pull_all()  # the newest values, after the other worker's last pushes
            return sync.shard_stats()
        finally:
            sync.close()

    stats = run_ranks(rank_fn, 2, timeout=200)[0]
    np.testing.assert_array_equal(nets[0].parameters()[0].value, nets[1].parameters()[0].value)
    accuracy = _accuracy(nets[0], test)
    assert chance_before < 0.3 and accuracy >= 0.75, (chance_before, accuracy, stats)
    # every push was applied on arrival: updates + drops == pushes, one per block message
    assert all(s["updates"] + s["drops"] == s["pushes"] for s in stats)


def test_a_push_too_stale_is_dropped_counted_and_answered_with_current_values(shards):
    endpoints = shards.start(1, workers=1, mode="async", extra=["--max-staleness", "1"])
    net, sync = small_net(), _sync(endpoints, block_bytes=64)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(3, 4))
        before = {p.name: p.value.copy() for p in net.parameters()}
        sync._versions = [0] * len(sync._versions)  # as if it had not heard of 3 updates
        train_steps(net, sync, batches(1, 4, seed=9))
        assert sync.drops == sum(len(t) for t in sync._targets)  # every push of that step
        for p in net.parameters():  # nothing applied; the replies brought the current values
            np.testing.assert_array_equal(p.value, before[p.name])
        assert sync.shard_stats()[0]["drops"] == sync.drops
        train_steps(net, sync, batches(1, 4, seed=9))  # up to date again: applied
        assert not np.array_equal(net.parameters()[0].value, before[net.parameters()[0].name])
    finally:
        sync.close()
