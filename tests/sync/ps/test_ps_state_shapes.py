"""The optimizer state a worker gathers from the shards and sends back has the shapes a local
optimizer keeps, whatever the parameter's shape: a 0-d parameter's moments are arrays, not
per-block scalars, and a sparse table's state (``rows x row_len`` per block) is cut into
requests within the shard's ``--max-message-bytes``."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import sparse_table_net

from distconv.arg import Arg
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync
from distconv.sync.ps.client import PServerSync

GRADS = (0.5, -2.0, -3.0)  # the moments of the scalar end negative


def _sync(endpoints, name, **kwargs):
    return PServerSync(
        create_optimizer(name, lr=0.1),
        rank=0,
        world_size=1,
        pservers=endpoints,
        insecure=True,
        timeout=20,
        **kwargs,
    )


def _steps(sync, params, grads) -> None:
    for g in grads:
        sync.start_step(1)
        for p in params:
            p.grad[...] = g
            p.inc_update(sync.on_gradient)
        sync.finish_step()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_a_scalar_parameters_state_round_trips_through_the_shards(shards, name):
    ref = Parameter("s", np.array(1.0))
    local = LocalSync(create_optimizer(name, lr=0.1))
    local.setup([ref])
    _steps(local, [ref], GRADS)
    want = local.state_dict()["s"]
    assert np.min(want[local.optimizer.buffers[0]]) < 0  # else the check below proves little

    scalar, vector = Parameter("s", np.array(1.0)), Parameter("w", np.ones(3))
    sync = _sync(shards.start(1, workers=1), name)
    try:
        sync.setup([scalar, vector])
        _steps(sync, [scalar, vector], GRADS)
        state = sync.state_dict()
    finally:
        sync.close()
    assert state["s"].keys() == want.keys()
    for key in want:  # was: a negative moment saved as 0 (the largest of it and 0)
        assert np.shape(state["s"][key]) == np.shape(want[key]), key
        np.testing.assert_allclose(state["s"][key], want[key], rtol=1e-14, err_msg=key)

    # resume on fresh shards (was refused: a 0-d moment for the shard's (1, 1) block)
    sync = _sync(shards.start(1, workers=1), name)
    try:
        sync.setup([scalar, vector], None, state)
        _steps(sync, [scalar, vector], GRADS)
    finally:
        sync.close()
    _steps(local, [ref], GRADS)
    np.testing.assert_allclose(scalar.value, ref.value, rtol=1e-14)


def _sparse_state(endpoints):
    """2 Adam steps of a 64 x 8 table in blocks of 4 rows on ``endpoints``; the state gathered."""
    net = sparse_table_net(64, 8, 3)
    sync = _sync(endpoints, "adam", block_bytes=4 * 8 * 8)
    try:
        sync.setup(net.parameters())
        for words in (np.array([1, 5, 9, 40]), np.array([5, 33, 62])):
            sync.prefetch({"embed.proj0.weight": words})
            sync.start_step(len(words))
            feed = {"words": Arg(ids=words, needs_grad=False)}
            feed["label"] = Arg(ids=words % 3, needs_grad=False)
            net.forward(feed)
            net.backward(sync, loss="loss", loss_scale=len(words))
            sync.finish_step()
        state = sync.state_dict()
        sync.load_state_dict(state)
        return state
    finally:
        sync.close()


@pytest.mark.timeout(120)
def test_a_sparse_tables_state_is_gathered_within_a_small_cap(shards):
    # 16 blocks of 2 x 256 bytes of moments each: 8 KiB in all, a few blocks per request
    capped = _sparse_state(shards.start(1, workers=1, extra=["--max-message-bytes", "2048"]))
    whole = _sparse_state(shards.start(1, workers=1))
    assert capped.keys() == whole.keys()
    for name in whole:
        assert capped[name].keys() == whole[name].keys()
        for key in whole[name]:
            np.testing.assert_array_equal(capped[name][key], whole[name][key], err_msg=key)
    assert np.any(whole["embed.proj0.weight"]["m"])
