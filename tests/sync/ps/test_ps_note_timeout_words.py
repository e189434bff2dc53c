"""A rank whose latest hello is a failure note, on another host (its process unseen), keeps a
told rank's refit waiting until ``--timeout``: the timeout names the rank and blames it, and
says the note's words too. It said only that the rank "sent nothing", as if it were silent or
paused, though the shard knew its fit had failed before setup. So does the timeout of an async
job with ``--on-worker-loss continue`` that loses the noted rank, where the rank had joined the
job before its failed fit: it went without the words (for rank 0 the job failed advising a
larger ``--timeout``). In-process shard, requests by hand."""

from __future__ import annotations

import logging
import time

import pytest
from test_ps_hello_description import GOOD
from test_ps_setup_note import _note

pytestmark = pytest.mark.timeout(30)

TOLD = "rank 0 could not set up: ValueError: an empty set"


def _hello(h, rank: int, run: int, job: dict) -> dict:
    return h.ask({"op": "hello", "rank": rank, "run": run, "host": "elsewhere", **job})[0]


def _gather(h, tag: str, rank: int = 1) -> dict | None:
    return h.answer({"op": "gather", "rank": rank, "tag": tag, "value": "d"})


def _wait_past_timeout(h, rank: int, run: int) -> None:
    """Past the 0.5 s timeout of a gather just held; ``rank`` beats, as a waiting worker
    does, so that only the gather times out."""
    for _ in range(3):
        time.sleep(0.25)
        assert h.ask({"op": "beat", "rank": rank, "run": run})[0]["op"] == "ok"
    h.shard._check_timeouts(time.monotonic())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_timeout_waiting_for_a_noted_rank_says_its_note(hand, mode):
    """Rank 1 is told of rank 0's note and fits again; rank 0's worker never comes back: the
    timeout of rank 1's job check blames rank 0 with the note's words."""
    h = hand(workers=2, mode=mode, timeout=0.5)
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    assert _hello(h, 0, 10, _note(0))["error"] == TOLD
    assert h.ask({"op": "bye", "rank": 0, "run": 10, "error": "ValueError"})[0]["op"] == "ok"
    assert _gather(h, "all_equal:1")["error"] == TOLD
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"  # rank 1 fits again
    assert _gather(h, "all_equal:2") is None
    _wait_past_timeout(h, 1, 11)
    reply = h.read()[0]
    assert reply["failed_ranks"] == [0], reply
    assert reply["error"].startswith("rank 0 (host elsewhere"), reply
    assert "sent nothing for" in reply["error"] and f"({TOLD})" in reply["error"], reply


@pytest.mark.parametrize("noted", [0, 1])
def test_a_continue_timeout_losing_a_noted_rank_that_joined_says_its_note(hand, caplog, noted):
    """Async, ``--on-worker-loss continue``: both ranks meet in a fit's job check (the noted
    rank joined the job); in the next fit the noted rank fails before setup, the other is told,
    fits again and waits. Its timeout loses the noted rank: rank 0 fails the job (the chief)
    with the note's words and no advice to raise ``--timeout`` (no longer wait brings a failed
    fit); rank 1 is lost, the shard's warning saying its note, and the other goes on alone."""
    other = 1 - noted
    told = f"rank {noted} could not set up: ValueError: an empty set"
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=0.5)
    assert _hello(h, 0, 10, GOOD)["op"] == "ok" and _hello(h, 1, 11, GOOD)["op"] == "ok"
    assert _gather(h, "all_equal:1", 0) is None
    assert _gather(h, "all_equal:1", 1)["values"] == ["d", "d"]
    assert h.read()[0]["values"] == ["d", "d"]  # the fit's job check met
    assert _hello(h, other, 10 + other, GOOD)["op"] == "ok"  # the next fit
    assert _hello(h, noted, 10 + noted, _note(noted))["error"] == told
    bye = {"op": "bye", "rank": noted, "run": 10 + noted, "error": "ValueError"}
    assert h.ask(bye)[0]["op"] == "ok"
    assert _gather(h, "all_equal:1", other)["error"] == told
    assert _hello(h, other, 10 + other, GOOD)["op"] == "ok"  # fits again
    assert _gather(h, "all_equal:1", other) is None
    with caplog.at_level(logging.WARNING, logger="distconv.pserver"):
        _wait_past_timeout(h, other, 10 + other)
    reply = h.read()[0]
    late = f"rank {noted} (host elsewhere, no step since its hello) sent nothing for all_equal:1"
    if noted == 0:
        assert reply["failed_ranks"] == [0] and reply["error"].startswith(late), reply
        assert f"within 0.5 s ({told}): rank 0 writes the checkpoints" in reply["error"], reply
        assert "--timeout" not in reply["error"], reply
        return
    assert reply["op"] == "ok" and reply["values"] == ["d", None], reply
    assert h.shard.lost == {1} and not h.shard.failed
    warned = [r.getMessage() for r in caplog.records if "going on without it" in r.getMessage()]
    assert len(warned) == 1 and late in warned[0] and f"0.5 s ({told})" in warned[0], warned
