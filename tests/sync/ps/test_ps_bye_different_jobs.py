"""A rank whose ``bye`` says the ranks run different jobs (a ``JobRefused`` it heard from
another shard) fails no rank, and the failure it leads is a refusal of the job; but only where
every rank gone said so, and a rank that failed on its own is named and blamed whatever the
others heard (review k608):

- the timeout of a held request missing such a rank was a plain failure (``SyncError``, exit 1
  with a traceback, the launcher restarting on it again and again), its words only quoted;
- a step left behind by two ranks read the lowest-numbered one's bye alone: a rank that closed
  on the mismatch it heard hid one that raised on its own, which was neither named nor blamed;
- a bye carrying ``failed_ranks`` (a ``PeerFailed`` from another shard) whose text leads with
  those words blamed no rank here, while the shard that failed first blamed its ranks.

Each on a real shard on 127.0.0.1 port 0 handed its requests one by one (:mod:`hand_shard`):
the orders here are ones a real run reaches only by chance."""

from __future__ import annotations

import time

import pytest
from test_ps_stuck import _gather, _hello_run

from distconv.messages import described
from distconv.rank_endings import different_jobs_text
from distconv.sync import JobRefused

#: what a rank whose hello another shard refused as another job's heard, and says bye with
WORDS = different_jobs_text(1, 0, "config.batch: 9 here, 8 there")
HEARD = described(JobRefused(f"rank 1, hello: pserver 127.0.0.1:1: {WORDS}"))


@pytest.mark.timeout(30)
def test_the_timeout_of_a_rank_gone_on_different_jobs_is_a_refusal_of_the_job(hand):
    """Rank 0 waits in the start-up gather; rank 1, of the run before as far as the shard can
    tell (its hello came first), closes on the mismatch: the timeout decides, and its failure
    leads with the words, as a refusal of the job, blaming no rank."""
    h = hand(workers=2, timeout=0.2)
    for rank, run in ((1, 11), (0, 5)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    h.send({"op": "bye", "rank": 1, "run": 11, "error": HEARD})
    assert h.read()[0]["op"] == "ok"  # the bye's: the gather is still held
    time.sleep(0.3)
    h.shard._check_timeouts(time.monotonic())
    reply = h.read()[0]
    assert reply["op"] == "error" and reply["error"].startswith(f"{WORDS}; rank 1 (host h"), reply
    assert "sent nothing for all_equal:1" in reply["error"], reply
    assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply
