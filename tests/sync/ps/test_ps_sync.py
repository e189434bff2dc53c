"""Sync mode: 2 workers through 2 real shards equal 1 process with twice the batch."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import batches, run_ranks, small_net, train_steps

from distconv.equivalence import mismatch, weights
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.sync.ps.client import PServerSync

STEPS, BATCH = 4, 8


def _local(optimizer: str, data) -> dict[str, np.ndarray]:
    net = small_net()
    sync = LocalSync(create_optimizer(optimizer, lr=0.05))
    sync.setup(net.parameters())
    train_steps(net, sync, data)
    return weights(net), sync.state_dict()


def _pserver(endpoints, optimizer: str, data, **kw):
    # only rank 0's initial values count: the others start elsewhere and must pull them
    # (built here: the initialisers share one global generator, threads would race on it)
    nets = [small_net(seed=rank) for rank in range(2)]

    def rank_fn(rank: int):
        net = nets[rank]
        sync = PServerSync(
            create_optimizer(optimizer, lr=0.05),
            rank=rank,
            world_size=2,
            pservers=endpoints,
            timeout=20,
            block_bytes=64,
            **kw,
        )
        try:
            sync.setup(net.parameters(), {"batch": BATCH})
            train_steps(net, sync, data, rank, 2)
            state = sync.state_dict()
            return weights(net), state, sync.shard_stats()
        finally:
            sync.close()

    return run_ranks(rank_fn, 2)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_two_workers_two_shards_equal_one_process_with_twice_the_batch(shards, optimizer):
    data = batches(STEPS, BATCH)
    want, want_state = _local(optimizer, data)
    endpoints = shards.start(2, workers=2)
    (w0, s0, stats), (w1, _, _) = _pserver(endpoints, optimizer, data, insecure=True)
    assert mismatch(want, w0) is None
    for name in want:
        np.testing.assert_array_equal(w0[name], w1[name])  # every worker holds the same weights
        for key, buf in want_state[name].items():
            np.testing.assert_allclose(s0[name][key], buf, rtol=1e-10, atol=1e-12)
    assert not np.array_equal(w0["conv1.weight"], small_net().parameters()[0].value)
    # the 64-byte blocks spread every large parameter over both shards, balanced by bytes
    assert all(s["pushes"] > 0 and s["updates"] > 0 for s in stats)
    assert abs(stats[0]["bytes_in"] - stats[1]["bytes_in"]) < 0.2 * stats[0]["bytes_in"]

    # two identical runs are bitwise equal (fresh shards: the blocks start from the seed again)
    again = _pserver(shards.start(2, workers=2), optimizer, data, insecure=True)
    for name in want:
        np.testing.assert_array_equal(again[0][0][name], w0[name])


def test_curve_job_trains_and_a_foreign_key_is_refused(shards, job_keys, tmp_path):
    from distconv.sync.ps.keys import make_keys

    data = batches(2, BATCH)
    want, _ = _local("sgd", data)
    endpoints = shards.start(2, workers=2, keys=job_keys)
    (w0, _, _), _ = _pserver(endpoints, "sgd", data, keys_dir=job_keys)
    assert mismatch(want, w0) is None

    make_keys(tmp_path / "other", workers=1)  # a well-formed pair the job does not know
    stranger = PServerSync(
        create_optimizer("sgd"),
        rank=0,
        world_size=2,
        pservers=endpoints,
        keys_dir=str(tmp_path / "other"),
        timeout=0.5,
    )
    try:
        with pytest.raises(Exception, match="no answer to hello"):
            stranger.setup(small_net().parameters())
    finally:
        stranger.close()
    assert "listening" in shards.log_text()
