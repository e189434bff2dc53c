"""A rank whose latest hello is a failure note, on another host (its process unseen), keeps a
told rank's refit waiting until ``--timeout``: the timeout names the rank and blames it, and
says the note's words too. It said only that the rank "sent nothing", as if it were silent or
paused, though the shard knew its fit had failed before setup. In-process shard, requests by
hand."""

from __future__ import annotations

import time

import pytest
from test_ps_hello_description import GOOD
from test_ps_setup_note import _note

pytestmark = pytest.mark.timeout(30)

TOLD = "rank 0 could not set up: ValueError: an empty set"


def _hello(h, rank: int, run: int, job: dict) -> dict:
    return h.ask({"op": "hello", "rank": rank, "run": run, "host": "elsewhere", **job})[0]


def _gather(h, tag: str) -> dict | None:
    return h.answer({"op": "gather", "rank": 1, "tag": tag, "value": "d"})


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
    for _ in range(3):  # past the gather's timeout; rank 1 beats, as a waiting worker does
        time.sleep(0.25)
        assert h.ask({"op": "beat", "rank": 1, "run": 11})[0]["op"] == "ok"
    h.shard._check_timeouts(time.monotonic())
    reply = h.read()[0]
    assert reply["failed_ranks"] == [0], reply
    assert reply["error"].startswith("rank 0 (host elsewhere"), reply
    assert "sent nothing for" in reply["error"] and f"({TOLD})" in reply["error"], reply
