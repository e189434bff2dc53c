"""A failure note's neighbours on a real shard: the process of a rank whose last fit failed
before setup ends without failing the job; a note answers the start-up job check, and another
gather where the job cannot go on without its rank (not a barrier whose timeout loses the rank
under ``--on-worker-loss continue``), nor once its rank is lost; a note naming another rank
than its sender, or a meeting's failure, is refused as malformed."""

from __future__ import annotations

import time

import pytest
from test_ps_hello_description import GOOD
from test_ps_processes import HOST, LONG, _kill, _two_looks, identity_of, sleeper  # noqa: F401, F811
from test_ps_setup_note import _hello, _note

from distconv.sync.errors import meeting_failure_description, setup_failure_description
from distconv.sync.ps.job_hello import hello_fields

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_process_ending_after_its_note_fails_nothing(hand, sleeper, mode):  # noqa: F811
    """Each rank's process trains a fit, then its script's last fit fails before setup (a
    note and a bye of the same run) and the process exits: that end is no crash (sync) nor
    a loss (async): the job stays healthy."""
    h = hand(workers=2, mode=mode, timeout=LONG)
    workers = [sleeper(), sleeper()]
    for rank, w in enumerate(workers):
        head = {"op": "hello", "rank": rank, "host": HOST, "run": rank}
        assert h.ask({**head, **hello_fields({}), "process": identity_of(w.pid)})[0]["op"] == "ok"
    for rank, w in enumerate(workers):
        head = {"op": "hello", "rank": rank, "host": HOST, "run": rank}
        said = h.ask({**head, **_note(rank), "process": identity_of(w.pid)})[0]
        assert "could not set up" in said["error"]
        bye = {"op": "bye", "rank": rank, "run": rank, "error": "ValueError: an empty set"}
        assert h.ask(bye)[0]["op"] == "ok"
    for w in workers:
        _kill(w)
    _two_looks(h)
    assert (h.shard.failed, h.shard.lost) == (None, set())


def test_a_note_mid_training_answers_no_barrier(hand):
    """Async with ``--on-worker-loss continue``: rank 2's restarted worker fails before setup
    mid-training; the other ranks' next barrier is no job check: it is held (rank 2 is lost
    at the timeout, and the job goes on), not refused with the note."""
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=LONG)
    for rank in range(3):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
    assert "could not set up" in _hello(h, 2, 99, _note(2))["error"]
    assert h.answer({"op": "gather", "rank": 0, "tag": "barrier:7", "value": None}) is None
    assert not h.shard.failed


@pytest.mark.parametrize(
    "described",
    [setup_failure_description(0, "X: y"), meeting_failure_description(1, "X: y")],
    ids=["naming-rank-0", "a-meeting's"],
)
def test_a_note_not_of_its_senders_setup_is_refused_and_tells_no_one(hand, described):
    """Rank 1's hello with a note naming rank 0, or a meeting's failure (which no hello
    carries), is refused as malformed: rank 0's held job check is not told "rank 0 could not
    set up" (its launcher blamed it for rank 1's words)."""
    h = hand(workers=2)
    assert _hello(h, 0, 10, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "all_equal:1", "value": "d"}) is None
    reply = _hello(h, 1, 11, hello_fields(described))
    assert "refused" not in reply and "could not" not in reply["error"]
    assert not h.client.poll(200) and not h.shard.setup_notes  # rank 0's gather still held


@pytest.mark.parametrize(
    ("mode", "loss", "held"),
    [
        ("sync", "fail", True),
        ("sync", "fail", False),
        ("async", "fail", True),
        ("async", "continue", True),
        ("async", "continue", False),
    ],
    ids=["sync-held", "sync-after", "async-fail-held", "continue-held", "continue-after"],
)
def test_a_note_answers_a_barrier_where_the_job_cannot_go_on_without_its_rank(
    hand, mode, loss, held
):
    """The ranks met in their job check; rank 0's worker restarts and fails before setup
    while rank 1 waits in the start-up barrier (or comes to it after the note): in sync mode,
    or async losing no rank (``--on-worker-loss fail``), or going on without a lost rank
    (``continue``) but for rank 0, the chief, that barrier can only fail at the timeout, so
    it is answered at once with the note, as a job check is."""
    h = hand(workers=2, mode=mode, on_worker_loss=loss, timeout=LONG)
    for rank in (0, 1):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "all_equal:1", "value": "d"}) is None
    h.send({"op": "gather", "rank": 1, "tag": "all_equal:1", "value": "d"})
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]
    barrier = {"op": "gather", "rank": 1, "tag": "barrier:2", "value": None}
    if held:
        assert h.answer(barrier) is None
    h.send({"op": "hello", "rank": 0, "run": 20, "host": HOST, **_note(0)})
    replies = [h.read()[0]]
    if held:
        assert h.client.poll(2000), f"one reply alone, the barrier still held: {replies}"
        replies.append(h.read()[0])
    else:
        assert h.answer({"op": "bye", "rank": 0, "run": 20})["op"] == "ok"
        replies.append(h.answer(barrier))
    for reply in replies:
        assert reply["error"] == "rank 0 could not set up: ValueError: an empty set", reply
        assert reply["refused"] == "job", reply
    assert not h.shard.gathers_held and not h.shard.failed


def test_a_note_of_a_rank_lost_since_answers_no_later_job_check(hand):
    """Async with ``--on-worker-loss continue``: rank 2's restarted worker fails before setup
    mid-training; the others' barrier loses it at the timeout and the job goes on; their next
    fit's job check meets without it, not refused with the lost rank's note (every rank
    stopped, where the job was to go on without it)."""
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=0.5)
    for rank in range(3):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
    assert "could not set up" in _hello(h, 2, 99, _note(2))["error"]
    assert h.answer({"op": "bye", "rank": 2, "run": 99})["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "barrier:7", "value": None}) is None
    assert h.answer({"op": "gather", "rank": 1, "tag": "barrier:7", "value": None}) is None
    time.sleep(0.6)  # the barrier's timeout; ranks 0 and 1 beat meanwhile (not silent)
    for rank in (0, 1):
        assert h.answer({"op": "beat", "rank": rank, "run": 10 + rank})["op"] == "ok"
    h.shard._check_timeouts(time.monotonic())  # the serving loop's turn: rank 2 lost
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]
    assert h.shard.lost == {2} and not h.shard.failed
    for rank in (0, 1):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "all_equal:8", "value": "d"}) is None
    h.send({"op": "gather", "rank": 1, "tag": "all_equal:8", "value": "d"})
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]


@pytest.mark.parametrize("closed_before", [False, True], ids=["training", "closed-a-run"])
def test_a_draining_shard_waits_for_no_rank_whose_fit_failed_before_setup(hand, closed_before):
    """Rank 1 trained (and closed that run, or not); its next worker's fit fails before setup
    (its note, its bye); rank 0 says bye. At SIGTERM no worker of this job is in: the drain
    ends at once, not after --drain-seconds (90 s by default) waiting for a rank that has
    nothing to checkpoint."""
    h = hand(workers=2, timeout=LONG)
    for rank in (0, 1):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
    if closed_before:
        assert h.answer({"op": "bye", "rank": 1, "run": 11})["op"] == "ok"
    assert "could not set up" in _hello(h, 1, 21, _note(1))["error"]
    assert h.answer({"op": "bye", "rank": 1, "run": 21})["op"] == "ok"
    assert h.answer({"op": "bye", "rank": 0, "run": 10})["op"] == "ok"
    h.shard.drain()
    assert h.shard.drained(time.monotonic())
