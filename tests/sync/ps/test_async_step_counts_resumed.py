"""An async checkpoint keeps each block's Adam step count: a dense parameter whose blocks lie
on two shards, a push dropped on one shard and applied on the other, resumes as it trained.

Staleness is judged per shard, so a push can be applied on one shard and dropped as stale on
the other: the parameter's blocks then hold different step counts. The checkpoint kept one
count per dense parameter, the largest, and a resume gave it to every block: the lagging
blocks' bias correction used a count their moments never saw. Real async shards; rank 0's push
to shard 0 is applied, then rank 1 pushes twice, then rank 0's push to shard 1 is two updates
stale (``--max-staleness 1``) and dropped. The restored shards must then take a step exactly as
the shards that trained do.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, shard_values, small_net

LR = 0.01


def _step(sync, params, grads: dict[str, np.ndarray]) -> None:
    sync.start_step(1)
    for p in params:
        p.grad[...] = grads[p.name]
        sync.on_gradient(p)
    sync.finish_step()


def _pushes_seen(sync, shard: int) -> int:
    return sync.shard_stats()[shard]["pushes"]


@pytest.mark.timeout(120)
def test_blocks_apart_in_step_count_resume_apart(shards):
    endpoints = shards.start(2, workers=2, mode="async", extra=["--max-staleness", "1"])
    nets = [small_net(seed=0), small_net(seed=0)]
    syncs = [insecure_worker(endpoints, r, 2, optimizer="adam", lr=LR) for r in range(2)]
    rng = np.random.default_rng(3)
    grads = [{p.name: rng.standard_normal(p.shape) for p in nets[0].parameters()} for _ in range(4)]
    send, sent_to_0, between = syncs[0]._send, [0], [grads[1], grads[2]]

    def rank_1_between_rank_0_shards(shard, header, *args, **kwargs):
        """Rank 0's pushes to shard 0 go and are applied, then rank 1's two steps, then rank
        0's pushes to shard 1 (two updates stale there)."""
        if header.get("op") == "push" and shard == 0:
            sent_to_0[0] += 1
        elif header.get("op") == "push" and between:
            deadline = time.monotonic() + 30
            while _pushes_seen(syncs[1], 0) < sent_to_0[0] and time.monotonic() < deadline:
                time.sleep(0.02)
            while between:
                _step(syncs[1], nets[1].parameters(), between.pop(0))
        return send(shard, header, *args, **kwargs)

    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        syncs[0]._send = rank_1_between_rank_0_shards
        _step(syncs[0], nets[0].parameters(), grads[0])
        syncs[0]._send = send
        assert syncs[0].drops > 0  # dropped on shard 1 alone: the blocks' counts now differ
        state = syncs[0].state_dict()  # its values (written into rank 0's) and state
        values = {p.name: p.value.copy() for p in nets[0].parameters()}
        _step(syncs[0], nets[0].parameters(), grads[3])
        trained = shard_values(endpoints)
    finally:
        for sync in syncs:
            sync.close()

    fresh = shards.start(2, workers=1, mode="async", extra=["--max-staleness", "1"])
    net = small_net(seed=0)
    for p in net.parameters():
        p.value[...] = values[p.name]
    sync = insecure_worker(fresh, 0, 1, optimizer="adam", lr=LR)
    try:
        sync.setup(net.parameters())
        sync.load_state_dict(state)
        _step(sync, net.parameters(), grads[3])
        resumed = shard_values(fresh)
    finally:
        sync.close()
    for name, value in resumed.items():
        np.testing.assert_allclose(value, trained[name], rtol=1e-12, err_msg=name)
