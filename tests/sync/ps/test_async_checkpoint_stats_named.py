"""An async chief's checkpoint names a shard silent to its ``stats`` as asked before the
checkpoint's ``get_state``, not a pull (review k327).

Since review k324 the checkpoint (``checkpoint_state``) pulls nothing: it asks each shard's
``stats``, then one ``get_state`` with values. The ``stats`` went out as a pull's, so a shard
that died then was named "while pull waited for it", and at a stop one silent past the stop's
patience was given up with "a shard answers a pull at once ... giving up the pull, this rank's
parameters not all the shards' values": a request the checkpoint does not make, and a
consequence it does not have. Real shard processes, two async workers; rank 1 stepped.
"""

from __future__ import annotations

import re

import pytest
from ps_helpers import asked_to_stop, batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps import channel

PATIENCE = 1.0
TIMEOUT = 20.0


def _chief_after_a_step_of_rank_1(shards, monkeypatch, elsewhere: bool):
    """The two workers of an async job on two shards (``elsewhere``: that say they run on
    another host, so that no process watch sees them end), after a step of rank 1."""
    if elsewhere:
        monkeypatch.setenv("HOSTNAME", "shard-host")  # the shards' hello replies name it
    endpoints = shards.start(2, workers=2, mode="async", extra=["--timeout", str(TIMEOUT)])
    if elsewhere:
        monkeypatch.setenv("HOSTNAME", "worker-host")
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker(endpoints, r, 2, optimizer="adam", timeout=TIMEOUT) for r in range(2)]
    run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
    train_steps(nets[1], syncs[1], batches(1, 8), 1, 2)
    return syncs


@pytest.mark.timeout(60)
def test_a_shard_gone_before_the_checkpoints_stats_is_named_for_its_get_state(shards, monkeypatch):
    syncs = _chief_after_a_step_of_rank_1(shards, monkeypatch, elsewhere=False)
    try:
        shards.procs[1].kill()
        shards.procs[1].wait()
        with pytest.raises(SyncError) as raised:
            syncs[0].checkpoint_state()
    finally:
        for s in syncs:
            s.close()
    said = str(raised.value)
    assert said.startswith("rank 0: pserver shard 1 ("), said
    assert said.endswith("ended (stopped, killed or crashed) while get_state waited for it"), said


@pytest.mark.timeout(60)
def test_a_stopping_chief_gives_up_the_checkpoint_not_a_pull(shards, monkeypatch):
    monkeypatch.setattr(channel, "STOP_PATIENCE", PATIENCE)
    syncs = _chief_after_a_step_of_rank_1(shards, monkeypatch, elsewhere=True)
    try:
        shards.procs[1].kill()
        shards.procs[1].wait()
        with asked_to_stop():
            with pytest.raises(SyncError) as raised:
                syncs[0].checkpoint_state()
    finally:
        for s in syncs:
            s.close()
    said = str(raised.value)
    assert said.startswith("rank 0: asked to stop (SIGTERM), and pserver shard(s) 1 ("), said
    assert "asked for stats) gave no answer to get_state in the " in said, said
    giving_up = r"a shard answers stats and get_state at once, .* giving up the checkpoint$"
    assert re.search(rf"s since: {giving_up}", said), said
    assert "pull" not in said, said
