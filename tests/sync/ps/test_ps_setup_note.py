"""A worker that could not set up says ``hello`` with a failure note (its description naming
its error alone) and ``bye`` (``fail_setup``): the shard takes it as "rank R could not set
up", and neither binds the job's description nor fails the job. Where every rank failed alike
each note named its own rank, the shard failed the job on the two "different jobs", for good:
a fit with the data fixed, or after a trained fit, was refused until the shard restarted, and
its /healthz turned 503. In-process shard, requests by hand."""

from __future__ import annotations

import urllib.request

import numpy as np
import pytest
from hand_shard import BLOCKS, ROWS
from test_ps_hello_description import GOOD

from distconv.service import ServiceEndpoints
from distconv.sync.errors import setup_failure_description
from distconv.sync.ps.job_hello import hello_fields

#: rank 0's note: its error, as fail_setup sends it
NOTE = hello_fields(setup_failure_description(0, "DataError: the training set's 'x' holds NaN"))
TOLD = "rank 0 could not set up: DataError: the training set's 'x' holds NaN"


def _note(rank: int, error: str = "ValueError: an empty set") -> dict:
    """Rank ``rank``'s failure note, as ``fail_setup`` sends it."""
    return hello_fields(setup_failure_description(rank, error))


def _hello(h, rank: int, run: int, job: dict) -> dict | None:
    return h.answer({"op": "hello", "rank": rank, "run": run, "host": "h", **job})


def _health(port: int) -> str:
    """The shard's /healthz text (urllib raises on a 503)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=10) as reply:
        return reply.read().decode()


def _meet(h, tag: str) -> None:
    """Ranks 0 and 1 meet in gather ``tag``: both answered with the values."""
    assert h.answer({"op": "gather", "rank": 0, "tag": tag, "value": "d"}) is None
    h.send({"op": "gather", "rank": 1, "tag": tag, "value": "d"})
    replies = [h.read()[0] for _ in range(2)]
    assert [r["op"] for r in replies] == ["ok", "ok"], replies


@pytest.mark.timeout(30)
def test_a_note_tells_the_waiting_rank_and_fails_nothing(hand):
    """Rank 1 waits in the start-up gather; rank 0's note answers it at once, as rank 0's
    failure, its bye counts for nothing, /healthz stays 200, and rank 0's fixed setup then
    meets rank 1's next one."""
    h = hand(workers=2)
    with ServiceEndpoints(role="server", rank=0) as service:
        port = service.start()
        h.shard.service = service
        assert _hello(h, 1, 11, GOOD)["op"] == "ok"
        assert h.answer({"op": "gather", "rank": 1, "tag": "all_equal:1", "value": "d"}) is None
        h.send({"op": "hello", "rank": 0, "run": 10, "host": "h", **NOTE})
        gather, hello = h.read()[0], h.read()[0]  # the gather dismissed first, then the hello
        for reply in (gather, hello):
            assert reply["op"] == "error" and reply["error"] == TOLD, reply
            assert reply["refused"] == "job" and "failed_ranks" not in reply, reply
        assert not h.shard.gathers_held
        bye = {"op": "bye", "rank": 0, "run": 10, "error": "DataError: NaN"}
        assert h.answer(bye)["op"] == "ok"
        assert not h.shard.left and not h.shard.failed
        h.shard._report_probes()  # the serving loop's turn
        assert _health(port).startswith("ok: server 0")
        assert _hello(h, 0, 10, GOOD)["op"] == "ok"  # the fixed fit: a second setup
        assert _hello(h, 1, 11, GOOD)["op"] == "ok"
        _meet(h, "all_equal:2")
        assert not h.shard.setup_notes and not h.shard.noted_run


@pytest.mark.timeout(30)
@pytest.mark.parametrize("trained", [False, True], ids=["fresh", "after-a-good-fit"])
def test_notes_of_every_rank_leave_the_job_to_the_next_fit(hand, trained):
    """Both ranks fail alike, each note naming its own rank: on a fresh shard the fixed fit's
    description becomes the job's, after a good fit its own job goes on (another job's is
    still refused); neither is told of the other's note (each failed itself)."""
    h = hand(workers=2)
    job = hello_fields({"batch": 8, "name": "job", "model": "m"})
    if trained:
        for rank in (0, 1):
            assert _hello(h, rank, 20 + rank, job)["op"] == "ok"
        _meet(h, "all_equal:1")
    for rank in (0, 1):
        note = hello_fields(setup_failure_description(rank, "ValueError: an empty set"))
        reply = _hello(h, rank, 20 + rank, note)
        assert reply["error"] == f"rank {rank} could not set up: ValueError: an empty set"
        assert h.answer({"op": "bye", "rank": rank, "run": 20 + rank})["op"] == "ok"
    assert not h.shard.failed and not h.shard.left and not h.shard.setup_notes
    assert (h.shard.job is not None) == trained
    if trained:  # the job bound by the good fit still decides
        assert _hello(h, 0, 20, GOOD)["refused"] == "job"
    for rank in (0, 1):
        assert _hello(h, rank, 20 + rank, job)["op"] == "ok"
    _meet(h, "all_equal:3" if trained else "all_equal:2")
    assert not h.shard.failed


@pytest.mark.timeout(30)
def test_a_rank_gathering_after_the_note_is_told_once(hand):
    """Rank 0's note (and bye) came before rank 1's hello: rank 1's gather is answered with
    it at once; its next gather (a refit, rank 0 fixed too) waits as any other."""
    h = hand(workers=2)
    assert _hello(h, 0, 10, NOTE)["error"] == TOLD
    assert h.answer({"op": "bye", "rank": 0, "run": 10})["op"] == "ok"
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    told = h.answer({"op": "gather", "rank": 1, "tag": "all_equal:1", "value": "d"})
    assert told["error"] == TOLD and told["refused"] == "job", told
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"  # rank 1 fits again, before rank 0 does
    assert h.answer({"op": "gather", "rank": 1, "tag": "all_equal:2", "value": "d"}) is None
    assert _hello(h, 0, 10, GOOD)["op"] == "ok"
    h.send({"op": "gather", "rank": 0, "tag": "all_equal:2", "value": "d"})
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]


@pytest.mark.timeout(30)
def test_a_late_note_of_the_same_failed_fit_tells_no_rank_that_failed_too(hand):
    """Both ranks' fits fail alike, but rank 0 is quick: its note, its bye and its next fit's
    hello and gather all come before rank 1's note. Rank 1's note is of the fit rank 0
    failed too: rank 0's gather is not told of it, and meets rank 1's next one."""
    h = hand(workers=2)
    assert _hello(h, 0, 10, NOTE)["error"] == TOLD
    assert h.answer({"op": "bye", "rank": 0, "run": 10})["op"] == "ok"
    assert _hello(h, 0, 10, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "all_equal:1", "value": "d"}) is None
    note = hello_fields(setup_failure_description(1, "DataError: NaN"))
    assert "could not set up" in _hello(h, 1, 11, note)["error"]  # rank 0's gather is still held
    assert h.answer({"op": "bye", "rank": 1, "run": 11})["op"] == "ok"
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    h.send({"op": "gather", "rank": 1, "tag": "all_equal:1", "value": "d"})
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]
    assert not h.shard.failed and not h.shard.setup_notes


@pytest.mark.timeout(30)
@pytest.mark.parametrize("push_first", [True, False], ids=["push-then-note", "note-then-push"])
def test_a_note_of_a_rank_restarted_mid_step_fails_the_step_it_left_at_once(hand, push_first):
    """Sync: rank 1's push of step 4 waits for rank 0's; rank 0's worker restarts (a new run)
    and fails before its setup. Its push can never come: the note fails the job at once, as
    rank 0's failure, as a step left behind by a bye does, not at the timeout; so does rank
    1's push that comes just after the note (and its bye), as it would just before it."""
    h = hand(workers=2, mode="sync", timeout=3600.0)
    h.seed()
    for rank in (0, 1):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
    push = {"op": "push", "rank": 1, "run": 11, "step": 4, "count": 1, "lr": 0.1, "params": [0]}
    push |= {"blocks": list(range(BLOCKS)), "versions": [0] * BLOCKS}
    if push_first:
        h.send(push, [np.zeros((ROWS, 1))] * BLOCKS)
        h.send({"op": "hello", "rank": 0, "run": 12, "host": "h", **NOTE})
        first = h.read()[0]
        assert h.client.poll(2000), f"one reply alone, the held push unanswered: {first}"
        pushed, hello = first, h.read()[0]
    else:
        hello = _hello(h, 0, 12, NOTE)
        assert h.answer({"op": "bye", "rank": 0, "run": 12})["op"] == "ok"
        h.send(push, [np.zeros((ROWS, 1))] * BLOCKS)
        assert h.client.poll(2000), "rank 1's push held for the timeout"
        pushed = h.read()[0]
    assert hello["error"] == TOLD and hello["refused"] == "job", hello
    assert pushed["error"].startswith(f"{TOLD}; rank 1 (step 4) waits for its push"), pushed
    assert pushed["failed_ranks"] == [0], pushed
    assert h.shard.failed == pushed["error"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("held", [True, False], ids=["held", "gathering-after"])
def test_a_rank_told_of_one_note_is_not_told_of_another_of_the_same_fit(hand, held):
    """Ranks 0 and 1 fail alike; rank 2 is told of rank 0's note (in its held job check, or
    its job check after both notes), and refits: its next job check is not refused with rank
    1's note of the fit it was already refused for, and meets the others' fixed fits."""
    h = hand(workers=3)
    assert _hello(h, 2, 12, GOOD)["op"] == "ok"
    if held:
        assert h.answer({"op": "gather", "rank": 2, "tag": "all_equal:1", "value": "d"}) is None
    for rank in (0, 1):
        note = hello_fields(setup_failure_description(rank, "ValueError: an empty set"))
        h.send({"op": "hello", "rank": rank, "run": 10 + rank, "host": "h", **note})
        for _ in range(2 if held and rank == 0 else 1):  # rank 2's gather, then the hello
            assert "could not set up" in h.read()[0]["error"]
        assert h.answer({"op": "bye", "rank": rank, "run": 10 + rank})["op"] == "ok"
    if not held:
        told = h.answer({"op": "gather", "rank": 2, "tag": "all_equal:1", "value": "d"})
        assert told["error"].startswith("rank 0 could not set up"), told
    assert _hello(h, 2, 12, GOOD)["op"] == "ok"  # rank 2 refits first
    assert h.answer({"op": "gather", "rank": 2, "tag": "all_equal:2", "value": "d"}) is None
    for rank in (0, 1):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "all_equal:2", "value": "d"}) is None
    h.send({"op": "gather", "rank": 1, "tag": "all_equal:2", "value": "d"})
    assert [h.read()[0]["op"] for _ in range(3)] == ["ok"] * 3
    assert not h.shard.failed and not h.shard.setup_notes


@pytest.mark.timeout(30)
def test_a_told_rank_that_fits_again_is_told_of_a_second_failed_fit(hand):
    """Rank 1 is told of rank 0's note and fits again; rank 0's next fit fails too: rank 1's
    held job check is told of that note at once (not left to the timeout)."""
    h = hand(workers=2)
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 1, "tag": "all_equal:1", "value": "d"}) is None
    h.send({"op": "hello", "rank": 0, "run": 10, "host": "h", **NOTE})
    assert [h.read()[0]["error"] for _ in range(2)] == [TOLD] * 2
    assert h.answer({"op": "bye", "rank": 0, "run": 10})["op"] == "ok"
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 1, "tag": "all_equal:2", "value": "d"}) is None
    h.send({"op": "hello", "rank": 0, "run": 10, "host": "h", **NOTE})
    assert h.client.poll(2000), "rank 1's job check left to the timeout"
    assert [h.read()[0]["error"] for _ in range(2)] == [TOLD] * 2


@pytest.mark.timeout(30)
def test_a_note_of_a_restarted_worker_drops_its_gather_of_the_run_before(hand):
    """Rank 0's worker waits in its job check, then a restarted worker of it (a new run)
    fails before setup: its old gather is dropped, its worker told so, as at any hello; left
    held, rank 1's restarted worker's job check met it and went on as if rank 0 had set up."""
    h = hand(workers=2)
    assert _hello(h, 0, 10, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "all_equal:1", "value": "d"}) is None
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    h.send({"op": "hello", "rank": 0, "run": 20, "host": "h2", **NOTE})
    old = h.read()[0]
    assert h.client.poll(2000), f"one reply alone, the old worker's gather still held: {old}"
    hello = h.read()[0]
    assert old["error"] == (
        "rank 0 started again (a newer worker said hello from host h2): this worker's "
        "all_equal:1 is of the run before, dropped"
    ), old
    assert hello["error"] == TOLD, hello
    assert not h.shard.gathers_held
    assert h.answer({"op": "bye", "rank": 0, "run": 20})["op"] == "ok"
    told = h.answer({"op": "gather", "rank": 1, "tag": "all_equal:1", "value": "d"})
    assert told["error"] == TOLD, told
    assert _hello(h, 1, 21, GOOD)["op"] == "ok"  # rank 1 restarted too
    assert h.answer({"op": "gather", "rank": 1, "tag": "all_equal:1", "value": "d"}) is None


@pytest.mark.timeout(30)
def test_a_second_note_of_a_rank_tells_a_rank_told_of_its_first(hand):
    """Rank 1 is told of rank 0's note in its held job check; rank 0's next fit fails before
    setup too (a second note) before rank 1 fits again: rank 1's next job check is told of it
    at once, not held for a rank whose fit failed (the timeout, the note's words lost)."""
    h = hand(workers=2, timeout=3600.0)
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 1, "tag": "all_equal:1", "value": "d"}) is None
    h.send({"op": "hello", "rank": 0, "run": 10, "host": "h", **NOTE})
    assert [h.read()[0]["error"] for _ in range(2)] == [TOLD] * 2
    assert h.answer({"op": "bye", "rank": 0, "run": 10})["op"] == "ok"
    assert _hello(h, 0, 10, NOTE)["error"] == TOLD  # rank 0's next fit fails too
    assert h.answer({"op": "bye", "rank": 0, "run": 10})["op"] == "ok"
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"  # rank 1 fits again
    told = h.answer({"op": "gather", "rank": 1, "tag": "all_equal:2", "value": "d"})
    assert told is not None, "rank 1's job check held for rank 0, whose fit failed"
    assert (told["error"], told["refused"]) == (TOLD, "job"), told
    assert not h.shard.setup_notes and not h.shard.gathers_held


@pytest.mark.timeout(30)
def test_a_second_note_of_a_rank_left_off_as_failing_alike_tells(hand):
    """Ranks 0 and 1 fail alike; rank 2 is told of rank 0's note in its held job check and
    left off rank 1's (the same fit). Rank 1's next fit fails too before rank 2 fits again:
    that note is of a new fit, so rank 2's next job check is told of it at once."""
    h = hand(workers=3, timeout=3600.0)
    assert _hello(h, 2, 12, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 2, "tag": "all_equal:1", "value": "d"}) is None
    h.send({"op": "hello", "rank": 0, "run": 10, "host": "h", **_note(0)})
    assert ["rank 0 could not" in h.read()[0]["error"] for _ in range(2)] == [True] * 2
    for error in ("ValueError: an empty set", "ValueError: fit 2's set is empty"):
        assert "rank 1 could not" in _hello(h, 1, 11, _note(1, error))["error"]
        assert h.answer({"op": "bye", "rank": 1, "run": 11})["op"] == "ok"
    assert _hello(h, 2, 12, GOOD)["op"] == "ok"  # rank 2 fits again
    told = h.answer({"op": "gather", "rank": 2, "tag": "all_equal:2", "value": "d"})
    assert told is not None, "rank 2's job check held for rank 1, whose next fit failed"
    assert told["error"] == "rank 1 could not set up: ValueError: fit 2's set is empty", told
