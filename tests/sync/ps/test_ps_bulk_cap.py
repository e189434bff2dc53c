"""Seed, pull-all, state gather and restore fit any ``--max-message-bytes``: the worker cuts them
into requests within the cap each shard reports in ``hello``, and training does not change."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.sync.base import SyncError

#: each shard holds ~870 bytes of values, ~1.8 KB of Adam state and at most 384 bytes of one
#: parameter (a push), in blocks of 64 bytes
CAP = 512
DATA = batches(4, 8)


def _sync(endpoints, rank, block_bytes=64):
    return insecure_worker(endpoints, rank, 2, optimizer="adam", block_bytes=block_bytes)


def _train(endpoints, start=None):
    """2 workers: set up (rank 0 seeds, from ``start`` = (weights, state) if given; rank 1
    pulls), 2 steps, rank 0 gathers the state, 2 more steps. Returns the weights after step 2
    and at the end, and the gathered state."""
    nets = [small_net(seed=rank) for rank in range(2)]
    if start is not None:
        for p in nets[0].parameters():
            p.value[...] = start[0][p.name]
    out = {}

    def rank_fn(rank):
        sync = _sync(endpoints, rank)
        try:
            sync.setup(nets[rank].parameters(), {"batch": 8}, None if start is None else start[1])
            train_steps(nets[rank], sync, DATA[:2] if start is None else [], rank, 2)
            if rank == 0:
                out["mid"] = {p.name: p.value.copy() for p in nets[0].parameters()}
                out["state"] = sync.state_dict()
            sync.barrier()
            train_steps(nets[rank], sync, DATA[2:], rank, 2)
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
    for p, q in zip(*(net.parameters() for net in nets)):
        np.testing.assert_array_equal(p.value, q.value)  # both workers hold the same weights
    return out["mid"], {p.name: p.value.copy() for p in nets[0].parameters()}, out["state"]


@pytest.mark.timeout(120)
def test_a_small_cap_changes_nothing_seed_pull_gather_and_restore(shards):
    capped = shards.start(2, workers=2, extra=["--max-message-bytes", str(CAP)])
    mid, end, state = _train(capped)
    ref_mid, ref_end, ref_state = _train(shards.start(2, workers=2))
    # sync mode sums in rank order whatever the requests: the runs are bitwise equal
    for name in ref_end:
        np.testing.assert_array_equal(mid[name], ref_mid[name])
        np.testing.assert_array_equal(end[name], ref_end[name])
        for key in ref_state[name]:
            np.testing.assert_array_equal(state[name][key], ref_state[name][key])
    assert any(np.any(v["m"]) for v in state.values())  # the state gathered is Adam's, live
    # restore step 2's weights and state through the same capped shards: the end is the same
    _, resumed, _ = _train(capped, start=(mid, state))
    for name in ref_end:
        np.testing.assert_array_equal(resumed[name], ref_end[name])


def test_a_parameter_that_cannot_be_pushed_within_the_cap_is_named_at_setup(shards):
    endpoints = shards.start(1, workers=1, extra=["--max-message-bytes", "128"])
    sync = insecure_worker(endpoints)
    try:
        with pytest.raises(SyncError, match=r"a push of conv1.weight carries 144 bytes .* 128:"):
            sync.setup(small_net().parameters())
    finally:
        sync.close()
