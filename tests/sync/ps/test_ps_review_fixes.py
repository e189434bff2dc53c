"""Review fixes: a NaN learning rate is refused, a state restore needs an entry for every
parameter (unless the optimizer keeps none), a failing sync update answers every waiting rank,
a NaN gradient names the rank that sent it. Real shard processes, except where the shard's
optimizer must be made to fail (an in-process shard on real sockets)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from ps_helpers import assert_equals_local_training, batches, run_ranks, small_net, train_steps

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard


def _sync(endpoints, rank=0, world=1, optimizer="sgd", timeout=10):
    return PServerSync(
        create_optimizer(optimizer, lr=0.05),
        rank=rank,
        world_size=world,
        pservers=endpoints,
        insecure=True,
        timeout=timeout,
        block_bytes=64,
    )


@pytest.mark.parametrize("lr", [float("nan"), float("inf")])
def test_a_push_with_a_nan_or_inf_lr_is_refused_and_the_weights_stay_finite(shards, lr):
    endpoints = shards.start(2, workers=1)
    data = batches(3, 4)
    net, sync = small_net(), _sync(endpoints)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, data[:1])
        sync.optimizer.lr = lr  # what a broken schedule would send
        with pytest.raises(SyncError, match=f"lr {lr} not finite"):
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


def test_a_stateful_optimizer_refuses_a_state_whose_entries_lack_its_keys(shards):
    endpoints = shards.start(2, workers=1)
    net, sync = small_net(), _sync(endpoints, optimizer="adam")
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 4))
        names = [p.name for p in net.parameters()]
        state = {name: {} for name in names}  # every entry empty: used to skip the restore
        with pytest.raises(ValueError, match=f"lacks '.*' of parameter {names[0]} "):
            sync.load_state_dict(state)
    finally:
        sync.close()


def test_a_parameter_without_an_entry_keeps_its_state_as_in_the_other_syncs(shards):
    """One frozen when the checkpoint was written has none (review k123: this was refused,
    where LocalSync and MPISync keep the state it has); the others are restored."""
    endpoints = shards.start(2, workers=1)
    net, sync = small_net(), _sync(endpoints, optimizer="adam")
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 4))
        state = sync.state_dict()
        missing = net.parameters()[3].name
        saved = state.pop(missing)
        sync.setup(net.parameters())  # a second setup keeps the state, as LocalSync does
        train_steps(net, sync, batches(1, 2))  # so the state moves on from the one saved
        before = sync.state_dict()
        assert np.any(before[missing]["m"] != saved["m"])
        sync.load_state_dict(state)
        now = sync.state_dict()
        for name, buffers in now.items():
            for key, value in buffers.items():
                if name == missing:  # as LocalSync: the entry it lacks keeps its state
                    np.testing.assert_array_equal(value, before[name][key])
                else:
                    np.testing.assert_array_equal(value, state[name][key])
    finally:
        sync.close()


def test_a_stateless_optimizer_restores_nothing_from_an_empty_state(shards):
    endpoints = shards.start(1, workers=1)
    data = batches(2, 4)
    net, sync = small_net(), _sync(endpoints)
    try:
        sync.setup(net.parameters())
        sync.load_state_dict({})  # plain SGD keeps no state: nothing to send, nothing to check
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
        assert f"gradient of parameter {name} from rank 1 is not finite" in message, message
