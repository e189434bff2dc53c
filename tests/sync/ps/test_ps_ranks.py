"""Ranks in PServerSync: numpy integers as rank and world size train as integers; a failing sync
update answers every waiting rank and a NaN gradient is named by the rank that sent it, on every
rank. Real shard processes, except where the shard's optimizer must be made to fail (an
in-process shard on real sockets)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from ps_helpers import assert_equals_local_training, batches, run_ranks, small_net, train_steps
from ps_helpers import small_block_sync as _sync

from distconv.sync.base import SyncError
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard


def test_a_numpy_rank_and_world_size_train_as_integers(shards):
    """SyncStrategy takes numpy's integers (5f53665), but kept them: PServerSync's first
    hello, and then its bye in close(), failed with msgpack's "can not serialize
    'numpy.int64' object"."""
    data = batches(2, 4)
    net, sync = small_net(), _sync(shards.start(2, workers=1), np.int64(0), np.int32(1))
    try:
        assert (type(sync.rank), type(sync.world_size)) == (int, int)
        sync.setup(net.parameters())
        train_steps(net, sync, data)
    finally:
        sync.close()
    assert_equals_local_training(net, data)


def _failing_update(value, grad, state, grad_scale=1.0):
    raise FloatingPointError("injected")


@pytest.mark.timeout(60)
def test_a_failing_sync_update_answers_every_waiting_rank():
    # an in-process shard (real sockets, its own thread), so that its optimizer can be made
    # to fail: no request a worker can send makes a correct optimizer raise
    shard = Shard(ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, timeout=30))
    endpoints = [shard.bind()]
    server = threading.Thread(target=shard.serve, daemon=True)
    server.start()

    def rank_fn(rank):
        # timeout 4: a rank left unanswered would say "no answer ... within 6 s" instead
        sync, net = _sync(endpoints, rank, 2, timeout=4), small_net(seed=rank)
        try:
            sync.setup(net.parameters())  # the model it trains: another's is refused at once
            if rank == 0:
                shard.optimizer.update = _failing_update
            sync.barrier()  # rank 1 pushes only once the fault is in place
            with pytest.raises(SyncError) as err:
                train_steps(net, sync, batches(1, 8), rank, 2)
            return str(err.value)
        finally:
            sync.close()

    try:
        messages = run_ranks(rank_fn, 2, timeout=40)
    finally:
        shard.stop()
        server.join(10)
        shard.close()
    for message in messages:
        assert "failed on shard 0: FloatingPointError: injected" in message, messages


@pytest.mark.timeout(60)
def test_a_nan_gradient_from_rank_1_is_named_as_rank_1_on_every_rank(shards):
    endpoints = shards.start(2, workers=2)

    def rank_fn(rank):
        net, sync = small_net(seed=rank), _sync(endpoints, rank, 2)
        try:
            sync.setup(net.parameters())
            sync.start_step(4)
            for i, param in enumerate(net.parameters()):
                param.grad[...] = 0.5
                if rank == 1 and i == 2:
                    param.grad.flat[1] = np.nan
                sync.on_gradient(param)
            with pytest.raises(SyncError) as err:
                sync.finish_step()
            return str(err.value), net.parameters()[2].name
        finally:
            sync.close()

    for message, name in run_ranks(rank_fn, 2):
        said = (
            f"the update diverged at step 1 (a non-finite gradient of {name}: "
            "rank 1's part is not finite"
        )
        assert said in message, message
