"""A shard's memory of the runs its ranks' hellos carried (``job_runs``, of the job it serves;
``runs_ended``, of the jobs before, kept for the shard's life) holds each rank's latest
:data:`~distconv.sync.ps.job_state.RUNS_KEPT` runs. It once held one entry per hello's run:
a rank restarted again and again within a job (a crash loop, or async ``--on-worker-loss
continue`` taking each restart back) and every job a shard started by hand served added to
it for as long as the job, or the shard, lasted. A stray of a recent run of a job before is
still refused in the next job. Real shards on 127.0.0.1 (port 0), their requests handed over
one at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_ps_next_job_same_shard import _gather, _hello

from distconv.sync.ps.job_state import RUNS_KEPT

pytestmark = pytest.mark.timeout(60)

#: how many times a rank's worker restarts within the job, or how many jobs a shard serves
RESTARTS = 40


def _bye(h, rank: int, run: int) -> None:
    assert h.ask({"op": "bye", "rank": rank, "run": run})[0]["op"] == "ok"


def test_a_rank_restarted_again_and_again_leaves_its_latest_runs_alone(hand):
    """Async, lost workers taken back: rank 1 restarts 40 times, each restart's hello taken.
    The job's runs are rank 0's one and rank 1's latest :data:`RUNS_KEPT`, not 41 of rank 1."""
    h = hand(workers=2, mode="async", on_worker_loss="continue")
    _hello(h, 0, 1)
    for run in range(100, 100 + RESTARTS + 1):
        _hello(h, 1, run)
    latest = [(1, run) for run in range(100 + RESTARTS + 1 - RUNS_KEPT, 100 + RESTARTS + 1)]
    assert sorted(h.shard.job_runs) == [(0, 1), *latest]


def test_a_shard_that_serves_job_after_job_keeps_each_rank_s_latest_runs(hand):
    """A shard started by hand serves 40 jobs of two ranks, each a new pair of workers that
    says bye: the runs of the jobs before are each rank's latest :data:`RUNS_KEPT`."""
    h = hand(workers=2)
    for job in range(RESTARTS):
        for rank in (0, 1):
            _hello(h, rank, 1000 * rank + job)
        h.seed()
        for rank in (0, 1):
            _bye(h, rank, 1000 * rank + job)
    _hello(h, 0, 99999)  # the next job: the one before ends
    assert len(h.shard.runs_ended) == 2 * RUNS_KEPT, sorted(h.shard.runs_ended)
    assert (1, 1000 + RESTARTS - 1) in h.shard.runs_ended


def test_a_stray_of_a_recent_run_of_the_job_before_is_still_refused(hand):
    """Rank 1's worker of run 2 lives on while the rank restarts :data:`RUNS_KEPT` - 1 times
    more; the job ends with the latest's bye. In the next job, run 2's gather is refused as of
    a job before, not held as rank 1's."""
    h = hand(workers=2)
    _hello(h, 0, 1)
    for run in range(2, 2 + RUNS_KEPT):
        _hello(h, 1, run)
    h.seed()
    _bye(h, 0, 1)
    _bye(h, 1, 1 + RUNS_KEPT)
    _hello(h, 0, 11)  # the next job
    _gather(h, 0, 11, "all_equal:1")
    said = h.answer({"op": "gather", "rank": 1, "run": 2, "tag": "barrier:7", "value": None})
    assert said is not None and said["op"] == "error", said
    assert "of a job before on this shard, which ended" in said["error"], said


def test_the_protocol_doc_gives_the_runs_a_shard_keeps():
    """docs/protocol.md states the bound the code keeps, and what a run further back meets."""
    doc = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
    text = " ".join(doc.read_text().split())
    assert f"The shard remembers each rank's {RUNS_KEPT} latest runs" in text
