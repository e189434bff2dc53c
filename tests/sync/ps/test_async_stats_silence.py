"""A shard silent while an async refresh waits for its ``stats``.

A refresh first asks every shard's ``stats`` (its stamps), and pulls only after: a shard that
hangs there (SIGSTOP here) was reported as giving ``no answer to pull``, a request this worker
never sent it. The message now says the shard was asked for its stats, and which shard, both at
the timeout and at a stop's patience. Real shard processes; the shard is stopped, not killed,
so no process watch sees it end.
"""

from __future__ import annotations

import os
import re
import signal

import pytest
from ps_helpers import asked_to_stop, batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps import channel

TIMEOUT = 1.0  # a silent shard is named GRACE x this after the request


@pytest.fixture
def paused(shards):
    """Two async shards, ranks 0 and 1 that trained a step, shard 1 then SIGSTOPped; yields
    rank 1's sync and shard 1's endpoint, resumes the shard and closes the syncs."""
    endpoints = shards.start(2, workers=2, mode="async", extra=["--timeout", "30"])
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker(endpoints, r, 2, timeout=TIMEOUT) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        run_ranks(lambda r: train_steps(nets[r], syncs[r], batches(1, 8), r, 2), 2)
        os.kill(shards.procs[1].pid, signal.SIGSTOP)
        yield syncs[1], endpoints[1]
    finally:
        os.kill(shards.procs[1].pid, signal.SIGCONT)
        for s in syncs:
            s.close()


@pytest.mark.timeout(60)
def test_a_shard_silent_to_the_stats_is_named_as_asked_for_them(paused):
    sync, endpoint = paused
    with pytest.raises(SyncError) as raised:
        sync.refresh_parameters()
    said = str(raised.value)
    want = f"rank 1: no answer to pull from pserver shard(s) 1 ({endpoint}, asked for stats) "
    assert said.startswith(want), said
    assert re.search(r"within 1\.5 s", said), said


@pytest.mark.timeout(60)
def test_a_stopping_rank_names_the_stats_its_silent_shard_was_asked(paused, monkeypatch):
    sync, endpoint = paused
    monkeypatch.setattr(channel, "STOP_PATIENCE", 0.5)
    monkeypatch.setattr(sync, "timeout", 20.0)  # the stop's patience, not the timeout, decides
    with asked_to_stop():
        with pytest.raises(SyncError) as raised:
            sync.refresh_parameters()
    said = str(raised.value)
    want = (
        f"rank 1: asked to stop (SIGTERM), and pserver shard(s) 1 ({endpoint}, asked for stats) "
        "gave no answer to pull in the "
    )
    assert said.startswith(want), said
