"""An asynchronous job's refresh at a stop, when a shard is gone.

At a stop (SIGTERM, the first Ctrl-C) every rank pulls the shards' values before it raises
``Preempted``. A shard on another host that was killed, or one that hangs, never answers, and no
process watch can see it: the pull waited 1.5 times the request timeout (90 s by default) before
the rank could stop, past a launcher's grace. A stopping rank's pull now gives up after the stop's
patience (:data:`distconv.sync.ps.channel.STOP_PATIENCE`), naming the shard and the signal, as a
step's wait does; a live shard's pull at a stop still brings the values back. Real shard processes.
"""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from ps_helpers import (
    asked_to_stop,
    batches,
    insecure_worker,
    run_ranks,
    shard_values,
    small_net,
    train_steps,
)

from distconv.sync.base import SyncError
from distconv.sync.ps import channel

PATIENCE = 1.0
TIMEOUT = 20.0  # the wait a gone shard held a stopping rank for: GRACE times this


@pytest.fixture
def trained(shards, monkeypatch):
    """Two async shards that say they run on another host (no process watch), and ranks 0 and 1
    that trained two steps on them; yields the nets and syncs, closes the syncs."""
    monkeypatch.setattr(channel, "STOP_PATIENCE", PATIENCE)
    monkeypatch.setenv("HOSTNAME", "shard-host")  # the shards' hello replies name it
    timeout = ["--timeout", str(TIMEOUT)]
    endpoints = shards.start(2, workers=2, mode="async", extra=timeout)
    monkeypatch.setenv("HOSTNAME", "worker-host")
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker(endpoints, r, 2, timeout=TIMEOUT) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        run_ranks(lambda r: train_steps(nets[r], syncs[r], batches(2, 8), r, 2), 2)
        yield endpoints, nets, syncs
    finally:
        for s in syncs:
            s.close()


@pytest.mark.timeout(60)
def test_a_stopping_rank_does_not_wait_out_the_timeout_for_a_gone_shard(shards, trained):
    _, _, (_, sync) = trained
    shards.procs[1].kill()
    shards.procs[1].wait()
    with asked_to_stop():
        began = time.monotonic()
        with pytest.raises(SyncError) as raised:
            sync.refresh_parameters()
    took = time.monotonic() - began
    # the pull's own cause: not a step's, which may wait for a worker that is gone
    said = str(raised.value)
    assert said.startswith("rank 1: asked to stop (SIGTERM), and pserver shard(s) 1 "), said
    assert re.search(
        r"gave no answer to pull in the [\d.]+ s since: a shard answers a pull at once", said
    ), said
    assert "giving up the pull, this rank's parameters not all the shards' values" in said, said
    assert "step" not in said, said
    assert PATIENCE - 0.1 < took < PATIENCE + 3, took  # not GRACE x TIMEOUT (30 s)


@pytest.mark.timeout(60)
def test_a_stopping_rank_gives_up_a_pull_whose_shard_went_after_its_stats(shards, trained):
    """The pull's own wait, not only the stats request before it: shard 1 answers
    the stats, then is killed before the pull."""
    _, _, (_, sync) = trained
    stats = sync._stamps

    def then_kill() -> list:
        counts = stats()
        shards.procs[1].kill()
        shards.procs[1].wait()
        return counts

    sync._stamps = then_kill
    with asked_to_stop():
        began = time.monotonic()
        with pytest.raises(SyncError, match=r"^rank 1: asked to stop \(SIGTERM\), .* 1 .*pull"):
            sync.refresh_parameters()
    assert PATIENCE - 0.1 < time.monotonic() - began < PATIENCE + 3  # not GRACE x TIMEOUT


@pytest.mark.timeout(60)
def test_a_stopping_rank_still_pulls_what_live_shards_hold(trained):
    endpoints, nets, syncs = trained
    with asked_to_stop():
        run_ranks(lambda r: syncs[r].refresh_parameters(), 2)
    want = shard_values(endpoints)
    for r, net in enumerate(nets):
        for p in net.parameters():
            np.testing.assert_array_equal(p.value, want[p.name], err_msg=f"rank {r}")
