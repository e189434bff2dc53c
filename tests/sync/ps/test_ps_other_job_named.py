"""A rank whose hello was refused as another job's is named so on the rank left waiting: rank
0, in the start-up gather when rank 1 closed on the refusal, said only that "ranks are at
different points of the job (...: closed on "SyncError: ...")", the cause buried in a quote
of rank 1's error, where rank 1 itself said it runs another job. The shard
names both ranks, as MPI does: the first hello set the job, which may be the odd one's.
Real shard, real workers (threads of this process) on 127.0.0.1."""

from __future__ import annotations

import threading

import pytest
from ps_helpers import insecure_worker, run_ranks, small_net
from test_ps_stuck import _bye, _gather, _hello_run, _push_w

from distconv.sync.base import SyncError
from distconv.sync.ps.refusals import START_ENDED

DIFF = "config.batch: 9 here, 8 there"


@pytest.mark.timeout(60)
def test_the_waiting_rank_leads_with_the_rank_that_runs_another_job(shards):
    (endpoint,) = shards.start(1, workers=2, extra=["--timeout", "60"])

    said_hello = threading.Event()  # rank 0's hello answered: its job is the shard's

    def rank_fn(rank: int) -> str | None:
        # an event, not a sleep: on a loaded machine rank 0's start outlasted a head start
        if rank == 1:
            assert said_hello.wait(30), "rank 0's hello never came back"
        sync = insecure_worker([endpoint], rank, 2, timeout=60)
        if rank == 0:
            hello = sync._hello

            def hello_then_go(description):
                try:
                    return hello(description)
                finally:
                    said_hello.set()

            sync._hello = hello_then_go
        try:
            sync.setup(small_net().parameters(), {"batch": 8 + rank})
        except SyncError as exc:
            return str(exc)
        finally:
            sync.close()
        return None

    said = run_ranks(rank_fn, 2, timeout=30)
    assert f"rank 1 and rank 0 run different jobs: {DIFF} (here: rank 1's" in said[1], said[1]
    shard_said = said[0].partition(f"pserver {endpoint}: ")[2]
    assert shard_said.startswith(f"rank 1 and rank 0 run different jobs: {DIFF} (here: rank 1's"), (
        said[0]
    )
    # nothing seeded: this start ends with the way on, the shard failing nothing
    assert shard_said.endswith(f"; {START_ENDED}"), said[0]


@pytest.mark.timeout(30)
def test_a_step_left_by_a_restart_of_another_job_leads_with_it(hand):
    """Sync: rank 0 pushed step 1; rank 1's restart runs another job, is refused and closes:
    the step that cannot complete is failed leading with why, not with a bare "closed"."""
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    h.seed()
    _push_w(h, 0, 1)  # held for rank 1's push of step 1
    assert "run different jobs" in _hello_run(h, 1, 33, {"batch": 8})["error"]
    _bye(h, 1, run=33)
    assert h.shard.failed.startswith("rank 1 and rank 0 run different jobs: batch: 8 here, "), (
        h.shard.failed
    )
    assert "rank 0 (step 1) waits for its push" in h.shard.failed


@pytest.mark.timeout(30)
def test_the_odd_rank_first_is_not_called_right(hand):
    """Rank 1, the odd one, says hello first and sets the job; rank 0's hello is refused and
    it closes. Rank 1 was told "rank 0 runs another job", which sent the user to fix the
    rank that was right: both are named, neither blamed."""
    h = hand(workers=2)
    assert _hello_run(h, 1, 11, {"batch": 9})["op"] == "ok"
    _gather(h, 1, "all_equal:1")
    assert "run different jobs" in _hello_run(h, 0, 5)["error"]
    _bye(h, 0, run=5)
    said = h.read()[0]["error"]  # rank 1's start-up gather: this start ended
    assert said.startswith("rank 0 and rank 1 run different jobs: "), said
    assert "(here: rank 0's hello; there: rank 1's, the first" in said
