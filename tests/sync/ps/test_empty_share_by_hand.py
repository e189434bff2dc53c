"""A loop of one's own on a synchronous parameter server, one worker's share of a step empty:
the shard waits for that worker's push of every parameter, so the worker hands each gradient
over with ``fire_every_gradient`` (zero, without a forward), and the two workers take the steps
one process takes on the whole batches."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import run_ranks

from distconv.arg import Arg
from distconv.empty_pass import fire_every_gradient
from distconv.equivalence import mismatch, model, weights
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync
from distconv.sync.ps.client import PServerSync

#: the global batch of each step: in the second, worker 1 of 2 has no example
SIZES = (16, 1, 7)


def global_batches():
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((n, 1, 8, 8)), rng.integers(0, 4, n)) for n in SIZES]


def train(net: Network, sync: SyncStrategy, rank: int = 0, world: int = 1) -> None:
    """Each global batch as one step of this rank's stride, by hand; an empty share fires."""
    for x, y in global_batches():
        xs, ys = x[rank::world], y[rank::world]
        sync.start_step(len(ys))
        if len(ys):
            net.forward({"image": Arg(xs, needs_grad=False), "label": Arg(ids=ys)})
            net.backward(sync, loss="loss", loss_scale=len(ys))
        else:  # no forward (an empty batch has no mean loss), and still every gradient
            fire_every_gradient(sync, net)
        sync.finish_step()


@pytest.mark.timeout(60)
def test_an_empty_share_fired_by_hand_matches_one_process(shards):
    reference = model(0)
    local = LocalSync(create_optimizer("adam", lr=0.01))
    local.setup(reference.parameters())
    train(reference, local)

    endpoints = shards.start(1, workers=2, mode="sync")
    # built here, not in the threads: the seed is the process's, one model's draws at a time
    nets = [model(0), model(100)]  # alike only through the broadcast

    def worker(rank: int) -> dict[str, np.ndarray]:
        net = nets[rank]
        sync = PServerSync(
            create_optimizer("adam", lr=0.01),
            rank=rank,
            world_size=2,
            pservers=endpoints,
            insecure=True,
            timeout=20,
        )
        try:
            sync.setup(net.parameters())
            train(net, sync, rank, 2)
            return weights(net)
        finally:
            sync.close()

    for got in run_ranks(worker, 2):
        assert (wrong := mismatch(weights(reference), got)) is None, wrong
