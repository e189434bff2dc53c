"""A sync step waiting on a shard that was killed and started again at its address, on another
host: the step's push went into the connection that dropped and was lost, and the fresh shard
never heard of it. The workers sat silent for 1.5 x ``timeout`` and then said the shard was gone
or slow ("raise --timeout"); docs/protocol.md promises the fresh shard's refusal, which says that
it restarted and to restart the job from its newest checkpoint. The worker now asks the shard
again once its connection comes back, and stops within a second with those words.

Real shard processes, killed with SIGKILL; "another host" is the shard's ``HOSTNAME``, which
differs from the worker's, so the worker follows no process of it in ``/proc`` (the path that
names a shard gone on this host) and learns of the restart from the connection alone. A
connection cut by the network (a relay between worker and shard), the shard alive, loses the
push too: the words giving up then say the connection dropped, not to raise --timeout.
"""

from __future__ import annotations

import threading
import time

import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps
from tcp_relay import relay_to

from distconv.sync.base import SyncError
from distconv.sync.ps.lost_requests import CAME_BACK

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


class HeldStep:
    """Ranks 0 and 1 of a sync job set up on a shard (rank 0 through ``rank_0_at``, rank 1 at
    ``endpoint``) and trained a step; rank 0's next step runs in a thread, its push held by the
    shard, which waits for rank 1's. :meth:`end` waits for that step: its error and when."""

    def __init__(self, endpoint: str, rank_0_at: str, timeout: float) -> None:
        self.nets = [small_net(), small_net()]
        at = [rank_0_at, endpoint]
        self.syncs = [insecure_worker([at[r]], r, 2, timeout=timeout) for r in range(2)]
        self.data = batches(2, 8)
        self.error: SyncError | None = None
        self.at = 0.0
        self._step = threading.Thread(target=self._rank_0_step, daemon=True)

    def start(self) -> None:
        nets, syncs, data = self.nets, self.syncs, self.data
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        run_ranks(lambda r: train_steps(nets[r], syncs[r], data[:1], r, 2), 2)
        self._step.start()
        time.sleep(1.0)  # the push is on the shard

    def end(self, seconds: float) -> tuple[str, float]:
        """Rank 0's step's error and when it came, waiting ``seconds`` at most."""
        self._step.join(seconds)
        assert not self._step.is_alive(), "rank 0's step hung"
        return str(self.error), self.at

    def close(self) -> None:
        for sync in self.syncs:
            sync.close()

    def _rank_0_step(self) -> None:
        try:
            train_steps(self.nets[0], self.syncs[0], self.data[1:], 0, 2)
        except SyncError as exc:
            self.error, self.at = exc, time.monotonic()


@pytest.mark.timeout(120)
def test_a_step_held_by_a_restarted_shard_stops_at_once_naming_the_restart(shards, monkeypatch):
    endpoint = start_elsewhere(shards, monkeypatch)
    held = HeldStep(endpoint, endpoint, TIMEOUT)
    try:
        held.start()
        shards.procs[0].kill()
        shards.procs[0].wait()
        start_elsewhere(shards, monkeypatch, ["--bind", endpoint])
        restarted = time.monotonic()
        said, at = held.end(TIMEOUT * 1.5 + 10)
    finally:
        held.close()
    assert said == f"rank 0, step 2: pserver {endpoint}: {RESTARTED}", said
    assert at - restarted < SOON, (at - restarted, said)


@pytest.mark.timeout(120)
def test_a_step_whose_connection_dropped_says_so_when_it_gives_up(shards, monkeypatch):
    """The network cut rank 0's connection, the shard lived on: asked again, it answers (it
    holds the job's values), and the push lost with the connection is never answered. The
    words giving up say the connection dropped and came back, not to raise --timeout."""
    endpoint = start_elsewhere(shards, monkeypatch)
    with relay_to(endpoint) as relay:
        held = HeldStep(endpoint, relay.endpoint, timeout=2.0)
        try:
            held.start()
            assert relay.cut() == 1
            said, _ = held.end(30)
        finally:
            held.close()
    assert said.startswith(
        f"rank 0: no answer to step 2 from pserver shard(s) 0 ({relay.endpoint})"
    )
    assert said.endswith(f"(1.5 x --timeout 2 s){CAME_BACK}"), said  # no other cause


@pytest.mark.timeout(120)
def test_a_connection_dropped_during_the_setup_is_no_restart(shards, monkeypatch):
    """The network cut rank 0's connection while the shard held its job check for rank 1,
    late, before rank 0 seeded the shard. Asked again then, the live shard refused the pull as
    any shard not seeded yet does ("worker 0 seeds it during setup"), and rank 0 stopped on
    those words, which named neither the drop nor a way out. Before its setup completed a
    worker asks no shard again; giving up, it says that the connection dropped and came
    back."""
    endpoint = start_elsewhere(shards, monkeypatch)
    with relay_to(endpoint) as relay:
        sync = insecure_worker([relay.endpoint], 0, 2, timeout=2.0)
        try:
            cut = threading.Timer(1.0, relay.cut)  # rank 0's job check waits for rank 1
            cut.start()
            with pytest.raises(SyncError) as stopped:
                sync.setup(small_net().parameters())
            cut.join()
        finally:
            sync.close()
    said = str(stopped.value)
    assert said.startswith("rank 0: no answer to ") and "not seeded" not in said, said
    assert said.endswith(f"(1.5 x --timeout 2 s){CAME_BACK}"), said


@pytest.mark.timeout(120)
def test_a_step_sent_after_the_connection_came_back_is_not_said_lost(shards, monkeypatch):
    """The network cut rank 0's connection while it sent nothing, and ZeroMQ connected again;
    rank 0's next step went into the new connection and was held by the shard for rank 1's,
    which never came. The worker read the drop only in that step's wait, took the step's push
    for one lost with the old connection, and said so, giving up ("no --timeout brings its
    answer"), when the shard held it for a worker: the words name that wait instead."""
    endpoint = start_elsewhere(shards, monkeypatch)
    nets = [small_net(), small_net()]
    with relay_to(endpoint) as relay:
        at = [relay.endpoint, endpoint]
        syncs = [insecure_worker([at[r]], r, 2, timeout=2.0) for r in range(2)]
        data = batches(2, 8)
        try:
            run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
            run_ranks(lambda r: train_steps(nets[r], syncs[r], data[:1], r, 2), 2)
            assert relay.cut() == 1
            time.sleep(1.0)  # ZeroMQ connects again through the relay
            with pytest.raises(SyncError) as gave_up:
                train_steps(nets[0], syncs[0], data[1:], 0, 2)
        finally:
            for sync in syncs:
                sync.close()
    said = str(gave_up.value)
    assert said.startswith(
        f"rank 0: no answer to step 2 from pserver shard(s) 0 ({relay.endpoint})"
    )
    assert CAME_BACK not in said, said
