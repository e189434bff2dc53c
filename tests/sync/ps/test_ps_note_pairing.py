"""A failure note of a rank told of another rank's note, sent before it set up again, is of
its next fit: it pairs with no note it knows of. It was paired with the note it had been told
of, as if the two ranks had failed one fit alike, so the noted rank of that older note, fixed
and waiting in its job check, was left off the new note: it waited for a rank whose fit had
failed until --timeout. In-process shard, requests by hand."""

from __future__ import annotations

import pytest
from test_ps_hello_description import GOOD
from test_ps_setup_note import _note

pytestmark = pytest.mark.timeout(30)


def _hello(h, rank: int, run: int, job: dict) -> dict:
    return h.ask({"op": "hello", "rank": rank, "run": run, "host": "h", **job})[0]


def _gather(h, rank: int, tag: str) -> dict | None:
    return h.answer({"op": "gather", "rank": rank, "tag": tag, "value": "d"})


def test_a_told_rank_next_note_tells_the_rank_whose_note_it_was_told_of(hand):
    """Three ranks. Rank 0's fit fails before setup; rank 1, waiting, is told of it; rank 2
    is still to be told (rank 0's note stands). Rank 0 fits again, fixed, and waits in its job
    check; then rank 1's next fit fails before setup: rank 0 is told of it at once."""
    h = hand(workers=3, timeout=3600.0)
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    assert _gather(h, 1, "all_equal:1") is None
    h.send({"op": "hello", "rank": 0, "run": 10, "host": "h", **_note(0)})
    for _ in range(2):  # rank 1's gather, then rank 0's hello
        assert h.read()[0]["error"].startswith("rank 0 could not set up"), "rank 1 told"
    assert h.ask({"op": "bye", "rank": 0, "run": 10})[0]["op"] == "ok"
    assert _hello(h, 0, 10, GOOD)["op"] == "ok"  # rank 0's fixed fit
    assert _gather(h, 0, "all_equal:2") is None
    h.send({"op": "hello", "rank": 1, "run": 11, "host": "h", **_note(1, "ValueError: fit 2")})
    assert h.client.poll(2000)
    first = h.read()[0]
    assert h.client.poll(2000), f"one reply alone, rank 0's job check still held: {first}"
    second = h.read()[0]
    said = "rank 1 could not set up: ValueError: fit 2"
    for reply in (first, second):  # rank 0's gather dismissed, then rank 1's hello refused
        assert reply["error"] == said and reply["refused"] == "job", reply
    assert not h.shard.gathers_held and not h.shard.failed


def test_a_late_note_of_a_fit_tells_no_rank_told_of_it_and_fitting_again(hand):
    """Three ranks. Ranks 0 and 1 fail one fit alike, rank 1 slowly: rank 2 is told of rank
    0's note and fits again before rank 1's note comes. That note is of the fit rank 2 was
    told of (rank 1 was never told of rank 0's): rank 2's job check is not refused again, and
    meets the others' fixed fits."""
    h = hand(workers=3, timeout=3600.0)
    assert _hello(h, 2, 12, GOOD)["op"] == "ok"
    assert _gather(h, 2, "all_equal:1") is None
    h.send({"op": "hello", "rank": 0, "run": 10, "host": "h", **_note(0)})
    for _ in range(2):  # rank 2's gather, then rank 0's hello
        assert h.read()[0]["error"].startswith("rank 0 could not set up")
    assert h.ask({"op": "bye", "rank": 0, "run": 10})[0]["op"] == "ok"
    assert _hello(h, 2, 12, GOOD)["op"] == "ok"  # rank 2 fits again
    assert _gather(h, 2, "all_equal:2") is None
    h.send({"op": "hello", "rank": 1, "run": 11, "host": "h", **_note(1)})  # of fit 1
    hello = h.read()[0]
    assert hello["error"].startswith("rank 1 could not set up"), hello
    assert not h.client.poll(300), f"rank 2 told twice of one fit: {h.read()[0]}"
    assert h.ask({"op": "bye", "rank": 1, "run": 11})[0]["op"] == "ok"
    for rank in (0, 1):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
    assert _gather(h, 0, "all_equal:2") is None
    h.send({"op": "gather", "rank": 1, "tag": "all_equal:2", "value": "d"})
    assert [h.read()[0]["op"] for _ in range(3)] == ["ok"] * 3
    assert not h.shard.failed and not h.shard.setup_notes


def test_three_notes_of_one_fit_tell_the_fourth_rank_once(hand):
    """Four ranks. Ranks 0, 1 and 2 fail one fit alike; rank 3, waiting, is told of the first
    note alone, and each note's own hello is refused in its words; the fixed fits all meet."""
    h = hand(workers=4, timeout=3600.0)
    assert _hello(h, 3, 13, GOOD)["op"] == "ok"
    assert _gather(h, 3, "all_equal:1") is None
    for rank in (0, 1, 2):
        h.send({"op": "hello", "rank": rank, "run": 10 + rank, "host": "h", **_note(rank)})
        for _ in range(2 if rank == 0 else 1):  # rank 3's gather first, by rank 0's note
            assert h.read()[0]["error"].startswith("rank 0" if rank == 0 else f"rank {rank}")
        assert not h.client.poll(200), h.read()[0]
        assert h.ask({"op": "bye", "rank": rank, "run": 10 + rank})[0]["op"] == "ok"
    for rank in (3, 0, 1):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
        assert _gather(h, rank, "all_equal:2") is None
    assert _hello(h, 2, 12, GOOD)["op"] == "ok"
    h.send({"op": "gather", "rank": 2, "tag": "all_equal:2", "value": "d"})
    assert [h.read()[0]["op"] for _ in range(4)] == ["ok"] * 4
    assert not h.shard.failed and not h.shard.setup_notes
