"""A shard that fails the job on a rank silent past its ``--timeout`` names the way out, where it
knows nothing else of that rank (it may only be slow: a straggler): raise ``--timeout``, which
``distconv-launch`` passes to the shards. Its words named the rank and the wait, and no option
(the MPI watchdog's and the late job check's do)."""

from __future__ import annotations

import time

import pytest

from distconv.rank_endings import RAISE_TIMEOUT
from distconv.sync.ps.job_hello import hello_fields

pytestmark = pytest.mark.timeout(60)


def _hello(h, rank: int) -> None:
    reply = h.ask({"op": "hello", "rank": rank, "host": "h", **hello_fields({}), "run": rank})
    assert reply[0]["op"] == "ok", reply


def test_a_sync_step_a_rank_sent_nothing_for_names_the_way_out(hand):
    h = hand(workers=2, mode="sync", timeout=1.0)
    for rank in (0, 1):
        _hello(h, rank)
    h.send({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None})
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.failed == (
        "rank 1 (host h, last step none) sent nothing for barrier:2 (a meeting of every rank) "
        f"within 1 s; {RAISE_TIMEOUT}"
    )


def test_an_async_rank_silent_past_the_timeout_names_the_way_out(hand):
    h = hand(workers=2, mode="async", on_worker_loss="fail", timeout=1.0)
    for rank in (0, 1):
        _hello(h, rank)
    h.shard.last_seen[1] -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.failed == f"rank 1 (host h, last step none) silent for 1 s; {RAISE_TIMEOUT}"
