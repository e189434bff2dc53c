"""An async chief's checkpoint names a shard silent to its ``stats`` as asked before the
checkpoint's ``get_state``, not a pull.

The checkpoint (``checkpoint_state``) pulls nothing: it asks each shard's
``stats``, then one ``get_state`` with values. The ``stats`` went out as a pull's, so a shard
that died then was named "while pull waited for it", and at a stop one silent past the stop's
patience was given up with "a shard answers a pull at once ... giving up the pull, this rank's
parameters not all the shards' values": a request the checkpoint does not make, and a
consequence it does not have. Real shard processes, two async workers; rank 1 stepped.
"""

from __future__ import annotations

import contextlib
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


def _chief_checkpoint_with_shard_1_gone(shards, monkeypatch, at_a_stop: bool) -> str:
    """Rank 0's ``checkpoint_state`` once shard 1 was killed, rank 1 having trained a step:
    the message of the SyncError it must raise. ``at_a_stop``: asked to stop, the shards said
    to run on another host (no process watch sees one end, only the stop's patience);
    else on this host, its end seen as rank 0 waits."""
    syncs = _chief_after_a_step_of_rank_1(shards, monkeypatch, elsewhere=at_a_stop)
    try:
        shards.procs[1].kill()
        shards.procs[1].wait()
        with asked_to_stop() if at_a_stop else contextlib.nullcontext():
            with pytest.raises(SyncError) as raised:
                syncs[0].checkpoint_state()
    finally:
        for s in syncs:
            s.close()
    return str(raised.value)


@pytest.mark.timeout(60)
def test_a_shard_gone_before_the_checkpoints_stats_is_named_for_its_get_state(shards, monkeypatch):
    said = _chief_checkpoint_with_shard_1_gone(shards, monkeypatch, at_a_stop=False)
    assert said.startswith("rank 0: pserver shard 1 ("), said
    assert said.endswith("ended (stopped, killed or crashed) while get_state waited for it"), said


@pytest.mark.timeout(60)
def test_a_stopping_chief_gives_up_the_checkpoint_not_a_pull(shards, monkeypatch):
    monkeypatch.setattr(channel, "STOP_PATIENCE", PATIENCE)
    said = _chief_checkpoint_with_shard_1_gone(shards, monkeypatch, at_a_stop=True)
    assert said.startswith("rank 0: asked to stop (SIGTERM), and pserver shard(s) 1 ("), said
    assert "asked for stats) gave no answer to get_state in the " in said, said
    giving_up = r"a shard answers stats and get_state at once, .* giving up the checkpoint$"
    assert re.search(rf"s since: {giving_up}", said), said
    assert "pull" not in said, said
