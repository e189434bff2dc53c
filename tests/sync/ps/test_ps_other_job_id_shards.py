"""With two shards, a rank that shard 0 stopped for a rank of another ``--job-id`` (a
``JobRefused``) closes with that error on shard 1 too, which blamed it: a step of the other
ranks held there failed naming it (``failed_ranks``: they stopped as on its failure, exit 75,
and the launcher's victims blamed it), though the ranks only run different jobs and no rank
failed. Shard 1 now reads the bye's error as the ranks' different jobs: it blames
no rank, and the failure it leads is a refusal of the job, led by those words. Real shards on
127.0.0.1 port 0: two served on threads under real workers, and one handed its requests one by
one."""

from __future__ import annotations

import time

import pytest
from ps_helpers import insecure_worker, run_ranks, served, small_net
from test_ps_other_job_id_waiters import REFUSAL, WAITERS
from test_ps_stuck import _gather, _hello_run, _meet, _push_w

from distconv.messages import described
from distconv.rank_endings import different_jobs_text
from distconv.sync import JobRefused
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.refusals import START_ENDED
from distconv.sync.ps.server import Shard

#: the shards' --timeout: nothing here waits it out
SHARD_TIMEOUT = 20.0


def _shard(index: int) -> Shard:
    config = ShardConfig(
        bind="127.0.0.1:0", shard=index, num_shards=2, workers=2, insecure=True,
        timeout=SHARD_TIMEOUT,
    )  # fmt: skip
    return Shard(config)


@pytest.mark.timeout(60)
def test_the_rank_stopped_for_another_id_is_blamed_on_no_shard():
    """Rank 1's worker names job 'job8': shard 0 stops rank 0 in its start-up gather with the
    refusal, and rank 0 says bye with it to both shards; shard 1 reads that bye as the
    ranks' different jobs, not as rank 0's failure."""
    with served(_shard(0)) as first, served(_shard(1)) as second:
        endpoints = [first.endpoint, second.endpoint]

        def rank_fn(rank: int) -> str:
            job = "job8" if rank else "local"
            sync = insecure_worker(endpoints, rank, 2, timeout=SHARD_TIMEOUT, job_id=job)
            try:
                sync.setup(small_net().parameters())
            except JobRefused as refused:
                sync.close()  # while it is handled: its bye carries it, as run_main's
                return str(refused)
            sync.close()
            raise AssertionError(f"rank {rank} set up a job whose ranks' ids differ")

        said = run_ranks(rank_fn, 2, timeout=40)
        deadline = time.monotonic() + 10
        while 0 not in set(second.left):  # the bye is sent, not answered: it comes soon after
            assert time.monotonic() < deadline, "shard 1 never heard rank 0's bye"
            time.sleep(0.01)
    assert said[1].endswith(REFUSAL), said  # the refused worker keeps its own refusal
    assert said[0].partition(f"pserver {first.endpoint}: ")[2].startswith(WAITERS), said
    assert first.failed.startswith(WAITERS), first.failed
    error = second.bye_error[0]
    assert error.startswith("JobRefused: ") and REFUSAL in error, error
    assert second._blamed([0]) == [], error  # [0] before
    assert second._job_refused(0).startswith(WAITERS), error


@pytest.mark.timeout(30)
def test_a_step_left_by_a_rank_that_closed_on_another_id_is_a_refusal_of_the_job(hand):
    """Three workers: rank 2's step is held on a shard (shard 1's part of it) when rank 0
    closes on the refusal it heard from shard 0 (another id claimed rank 1 there): the step
    fails at once, as before, but led by the refusal and blaming no rank."""
    h = hand(workers=3)
    for rank, run in ((0, 5), (1, 11), (2, 17)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    h.seed()
    _push_w(h, 2, 1)
    heard = JobRefused(
        f"rank 0, all_equal:1: pserver 127.0.0.1:1: {WAITERS}holds rank 1 here: rank 0 (host "
        "h, no step since its hello) waits in all_equal:1"
    )
    h.send({"op": "bye", "rank": 0, "run": 5, "error": described(heard)})
    replies = {head["op"]: head for head, _ in (h.read(), h.read())}  # the bye's, the push's
    reply = replies["error"]
    assert reply["op"] == "error" and reply["error"].startswith(f"{WAITERS}holds rank 1"), reply
    assert "rank 2 (step 1) waits for its push" in reply["error"], reply
    assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply
    assert h.shard.failed_ranks == [], h.shard.failed_ranks


@pytest.mark.timeout(30)
def test_a_gather_left_by_a_rank_that_closed_on_different_jobs_is_a_refusal_of_the_job(hand):
    """Shard 0: rank 0 waits at a barrier when rank 1 closes on its hello refused by another
    shard as another job's (a shard of the two that was started again, whose first hello was
    another job's): the gather fails at once, as before, led by the ranks' different jobs, as a
    refusal of the job, blaming neither rank."""
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    _gather(h, 0, "barrier:2")
    words = different_jobs_text(1, 0, "config.batch: 9 here, 8 there")
    heard = JobRefused(f"rank 1, hello: pserver 127.0.0.1:1: {words}")
    h.send({"op": "bye", "rank": 1, "run": 11, "error": described(heard)})
    replies = {head["op"]: head for head, _ in (h.read(), h.read())}  # the bye's, rank 0's
    reply = replies["error"]
    assert reply["error"] == f"{words}; {START_ENDED}", reply  # nothing seeded: a start ended
    assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply
