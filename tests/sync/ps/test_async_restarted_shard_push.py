"""A job's only async worker pushing to a shard that restarted since its setup.

A single async worker asks no ``stats`` at a refresh (its replies are the shards' values), so
the first it hears of a shard started again (killed, its pod restarted: parts are never read
back, it comes up empty) is the refusal of its next push. That said ``shard not seeded yet
(worker 0 seeds it during setup)``, which sends an operator looking for a seed that never came,
when the shard lost the values and optimizer state it was seeded with. A shard that never heard
the rank's ``hello`` now says it started after that worker's setup, and what is lost. Real
shard processes; the restarted shard binds the same address.
"""

from __future__ import annotations

import pytest
from ps_helpers import batches, insecure_worker, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps.job_hello import hello_fields

NOT_SEEDED_YET = "shard not seeded yet (worker 0 seeds it during setup)"


@pytest.mark.timeout(60)
def test_a_push_to_a_restarted_shard_is_refused_as_a_restart(shards):
    (endpoint,) = shards.start(1, 1, mode="async")
    net = small_net()
    sync = insecure_worker([endpoint], 0, 1)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 8))
        shards.procs[0].kill()
        shards.procs[0].wait()
        shards.start(1, 1, mode="async", extra=["--bind", endpoint])
        sync.refresh_parameters()  # nothing asked: a job's only worker holds the shards' values
        with pytest.raises(SyncError) as raised:
            train_steps(net, sync, batches(1, 8))
    finally:
        sync.close()
    said = str(raised.value)
    want = f"rank 0, step 2: pserver {endpoint}: shard not seeded yet: it started after this "
    assert said.startswith(want + "worker's hello"), said
    assert "restart the job from its newest checkpoint" in said, said
    assert "worker 0 seeds it during setup" not in said, said


def test_a_worker_that_said_hello_before_the_seed_is_told_worker_0_seeds_it(hand):
    """Only a worker the shard never heard is told of a restart: one whose ``hello`` it took,
    and a request without a run id, are told the seed is still to come (an in-process shard,
    handed each request)."""
    h = hand(mode="async", workers=1)
    pull = {"op": "pull", "blocks": [0], "run": 7}
    assert "started after this worker's hello" in h.ask(pull)[0]["error"]
    assert h.ask({"op": "pull", "blocks": [0]})[0]["error"] == NOT_SEEDED_YET
    hello = {"op": "hello", "host": "h", "run": 7, **hello_fields({"name": "job"})}
    assert h.ask(hello)[0]["op"] == "ok"
    assert h.ask(pull)[0]["error"] == NOT_SEEDED_YET
