"""A newcomer's hello for a rank whose worker was heard lately, from another process the shard
cannot look up (another host), is held: refused once that worker speaks again, taken as the
rank's restart once it stays silent past the window (``distconv/sync/ps/duplicates.py``). The
order of events pinned: a shard handed its requests one by one. The real workers' side is
``test_ps_second_copy_of_a_rank.py``."""

from __future__ import annotations

import time

import pytest
from test_ps_run_ended_by_restart import ENDED
from test_ps_stuck import _meet, _push_w

from distconv.sync.ps.duplicates import heard_within
from distconv.sync.ps.job_hello import hello_fields


def _hello(h, rank: int, run: int, process: str) -> dict | None:
    """Rank ``rank``'s hello of ``run`` from ``process`` (no identity this shard can look up);
    its reply, or None while the shard holds it."""
    head = {"op": "hello", "rank": rank, "host": "h", **hello_fields({}), "run": run}
    return h.answer({**head, "process": process})


def _training(hand):
    """Ranks 0 and 1 (runs 10 and 11) met and are seeded; rank 0's push of step 1 is held."""
    h = hand(workers=2)
    for rank in range(2):
        assert _hello(h, rank, 10 + rank, f"process {rank}")["op"] == "ok"
    _meet(h)
    h.seed()
    _push_w(h, 0, 1)
    return h


@pytest.mark.timeout(30)
def test_a_held_hello_is_refused_once_the_rank_s_worker_speaks(hand):
    h = _training(hand)
    assert _hello(h, 1, 21, "a copy") is None  # held: rank 1 was heard just now
    refused = h.ask({"op": "beat", "rank": 1, "run": 11})[0]  # the held hello's answer first
    assert refused["error"].startswith(
        "rank 1 is held by a live worker (host h, no step since its hello, heard 0.0 s ago): "
        "is this a second copy of its command? stop one of them"
    ), refused
    assert h.read()[0]["op"] == "ok"  # the beat's
    assert h.shard.run_of[1] == 11 and h.shard.ended_run is None and not h.shard.failed
    _push_w(h, 1, 1)  # the job trains on: step 1 completes
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]


@pytest.mark.timeout(30)
def test_a_held_hello_is_the_rank_s_restart_once_its_worker_stays_silent(hand):
    h = _training(hand)
    assert _hello(h, 1, 21, "a restart") is None
    h.shard._check_timeouts(time.monotonic() + heard_within(h.shard.config.timeout) + 1)
    dropped, taken = h.read()[0], h.read()[0]  # rank 0's held push, then the hello
    assert (
        dropped["error"] == f"{ENDED.replace('rank 2', 'rank 1')}; this worker's step 1 is dropped"
    )
    assert taken["op"] == "ok" and h.shard.run_of[1] == 21


@pytest.mark.timeout(30)
def test_a_held_hello_that_fails_unforeseen_is_answered_and_the_shard_serves_on(hand):
    """A bug met in taking a held hello (here injected) is answered as a request's is, a
    ``shard error``: it came out of the shard's timeout check and ended its loop, every job on
    the shard with it."""
    h = _training(hand)
    assert _hello(h, 1, 21, "a restart") is None

    def bug(*args):
        raise KeyError("injected")

    h.shard._op_hello = bug
    h.shard._check_timeouts(time.monotonic() + heard_within(h.shard.config.timeout) + 1)
    said = h.read()[0]
    assert said["op"] == "error" and said["error"].startswith("shard error: KeyError"), said
    assert h.shard.stats.errors == 1 and not h.shard.failed and 1 not in h.shard.held_hellos
