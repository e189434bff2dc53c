"""A sync step waiting on a shard that was killed and started again at its address, on another
host: the step's push went into the connection that dropped and was lost, and the fresh shard
never heard of it. The workers sat silent for 1.5 x ``timeout`` and then said the shard was gone
or slow ("raise --timeout"); docs/protocol.md promises the fresh shard's refusal, which says that
it restarted and to restart the job from its newest checkpoint. The worker now asks the shard
again once its connection comes back, and stops within a second with those words.

Real shard processes, killed with SIGKILL; "another host" is the shard's ``HOSTNAME``, which
differs from the worker's, so the worker follows no process of it in ``/proc`` (the path that
names a shard gone on this host) and learns of the restart from the connection alone.
"""

from __future__ import annotations

import threading
import time

import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.sync.base import SyncError

TIMEOUT = 20  # a worker's wait: 30 s
#: far under one wait: the connection comes back within ZeroMQ's reconnect, the refusal at once
SOON = 8.0
#: what the fresh shard says (docs/protocol.md, "Parts are never read back")
RESTARTED = (
    "shard not seeded yet: it started after this worker's hello (it was started again, and the "
    "values and optimizer state it was seeded with are gone): restart the job from its newest "
    "checkpoint"
)


def start_elsewhere(shards, monkeypatch, extra=()) -> str:
    """One shard of a 2-worker sync job that says it runs on another host than the workers."""
    monkeypatch.setenv("HOSTNAME", "shard-host")
    (endpoint,) = shards.start(1, 2, extra=list(extra))
    monkeypatch.setenv("HOSTNAME", "worker-host")
    return endpoint


@pytest.mark.timeout(120)
def test_a_step_held_by_a_restarted_shard_stops_at_once_naming_the_restart(shards, monkeypatch):
    endpoint = start_elsewhere(shards, monkeypatch)
    nets = [small_net(), small_net()]
    syncs = [insecure_worker([endpoint], r, 2, timeout=TIMEOUT) for r in range(2)]
    data = batches(2, 8)
    ended: dict[str, object] = {}

    def rank_0_step() -> None:  # its push held by the shard, which waits for rank 1's
        try:
            train_steps(nets[0], syncs[0], data[1:], 0, 2)
        except SyncError as exc:
            ended.update(error=exc, at=time.monotonic())

    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        run_ranks(lambda r: train_steps(nets[r], syncs[r], data[:1], r, 2), 2)
        step = threading.Thread(target=rank_0_step, daemon=True)
        step.start()
        time.sleep(1.0)  # the push is on the shard
        shards.procs[0].kill()
        shards.procs[0].wait()
        start_elsewhere(shards, monkeypatch, ["--bind", endpoint])
        restarted = time.monotonic()
        step.join(TIMEOUT * 1.5 + 10)
        assert not step.is_alive(), "rank 0's step hung"
    finally:
        for sync in syncs:
            sync.close()
    said = str(ended["error"])
    assert said == f"rank 0, step 2: pserver {endpoint}: {RESTARTED}", said
    assert ended["at"] - restarted < SOON, (ended["at"] - restarted, said)
