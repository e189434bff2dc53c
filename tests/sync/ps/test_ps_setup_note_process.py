"""The process of a rank whose fit failed before setup (its failure note sent, its bye said)
ends while a worker that was told of the note and fitted again waits for that rank: no worker
of the rank will join that wait, so it is answered at once with the note and the end, not at
the timeout. A rank's worker started after the note (a relaunch) still waits, for the rank's
relaunched worker; so does an async job going on without a lost rank, where the wait's
timeout loses the rank (not rank 0, the chief, nor one that never joined). Real processes."""

from __future__ import annotations

import time

import pytest
from test_ps_hello_description import GOOD
from test_ps_processes import HOST, LONG, _kill, _two_looks, identity_of, sleeper  # noqa: F401, F811

from distconv.sync.errors import setup_failure_description
from distconv.sync.ps.job_hello import hello_fields

pytestmark = pytest.mark.timeout(60)

TOLD = "rank 0 could not set up: ValueError: an empty set"


def _hello(h, rank: int, run: int, job: dict, pid: int | None = None) -> dict:
    head = {"op": "hello", "rank": rank, "run": run, "host": HOST, **job}
    return h.ask({**head, "process": identity_of(pid)} if pid else head)[0]


def _gather(h, tag: str) -> dict | None:
    return h.answer({"op": "gather", "rank": 1, "tag": tag, "value": "d"})


def _noted_and_told(h, pid: int) -> None:
    """Rank 0's note (from process ``pid``) and its bye; rank 1 told in its job check."""
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    note = hello_fields(setup_failure_description(0, "ValueError: an empty set"))
    assert _hello(h, 0, 10, note, pid)["error"] == TOLD
    assert h.ask({"op": "bye", "rank": 0, "run": 10, "error": "ValueError"})[0]["op"] == "ok"
    assert _gather(h, "all_equal:1")["error"] == TOLD


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("held", [True, False], ids=["held", "gathering-after"])
def test_a_noted_process_ending_answers_a_refit_waiting_for_it(hand, sleeper, mode, held):  # noqa: F811
    h = hand(workers=2, mode=mode, timeout=LONG)
    worker = sleeper()
    _noted_and_told(h, worker.pid)
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"  # rank 1 fits again (its own worker)
    if held:
        assert _gather(h, "all_equal:2") is None
    _kill(worker)
    _two_looks(h)
    if held:
        reply = h.read()[0] if h.client.poll(2000) else None
    else:
        reply = _gather(h, "all_equal:2")
    assert reply is not None and reply["error"].startswith(f"{TOLD}; its process (pid "), reply
    assert "ended since" in reply["error"] and reply["refused"] == "job", reply
    assert (h.shard.failed, h.shard.lost, h.shard.gathers_held) == (None, set(), set())


def test_a_rank_relaunched_after_the_noted_process_ended_waits_for_its_relaunch(hand, sleeper):  # noqa: F811
    """Rank 1's relaunched worker (a new run, after the note) waits in its job check: rank 0's
    relaunched worker may still join it."""
    h = hand(workers=2, mode="sync", timeout=LONG)
    worker = sleeper()
    _noted_and_told(h, worker.pid)
    _kill(worker)
    _two_looks(h)
    assert _hello(h, 1, 21, GOOD)["op"] == "ok"
    assert _gather(h, "all_equal:1") is None
    assert _hello(h, 0, 20, GOOD)["op"] == "ok"
    h.send({"op": "gather", "rank": 0, "tag": "all_equal:1", "value": "d"})
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]


def test_going_on_without_a_lost_rank_a_noted_process_ending_answers_no_barrier(hand, sleeper):  # noqa: F811
    """Async with ``--on-worker-loss continue``: the ranks met in their job check; rank 1's
    worker restarts and fails before setup, its process ends while rank 0 waits in a barrier:
    that barrier waits for the timeout, which loses rank 1 (it joined the job, and is not
    the chief), and the job goes on."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=LONG)
    worker = sleeper()
    for rank in (0, 1):
        assert _hello(h, rank, 10 + rank, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "all_equal:1", "value": "d"}) is None
    assert _gather(h, "all_equal:1")["op"] == "ok" and h.read()[0]["op"] == "ok"
    note = hello_fields(setup_failure_description(1, "ValueError: an empty set"))
    assert "rank 1 could not set up" in _hello(h, 1, 21, note, worker.pid)["error"]
    assert h.ask({"op": "bye", "rank": 1, "run": 21})[0]["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None}) is None
    _kill(worker)
    _two_looks(h)
    assert not h.client.poll(200) and not h.shard.failed and not h.shard.lost


def _closed_a_run_before(h) -> None:
    """Both ranks set up, meet in their job check and close (bye, no error): a script that
    closes its sync after one fit and makes another for the next."""
    for rank in (0, 1):
        assert _hello(h, rank, rank, GOOD)["op"] == "ok"
    assert h.answer({"op": "gather", "rank": 0, "tag": "all_equal:1", "value": "d"}) is None
    assert _gather(h, "all_equal:1")["op"] == "ok" and h.read()[0]["op"] == "ok"
    for rank in (0, 1):
        assert h.ask({"op": "bye", "rank": rank, "run": rank})[0]["op"] == "ok"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_noted_process_ending_answers_a_refit_after_a_closed_run(hand, sleeper, mode):  # noqa: F811
    """Rank 0 closed a run before its next fit failed before setup: its process's end still
    answers rank 1's refit waiting for it, as where rank 0 never closed (its clean bye kept
    that end unseen, and the timeout blamed no rank: "rank 0 closed", exit 1)."""
    h = hand(workers=2, mode=mode, timeout=LONG)
    worker = sleeper()
    _closed_a_run_before(h)
    _noted_and_told(h, worker.pid)
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    assert _gather(h, "all_equal:2") is None
    _kill(worker)
    _two_looks(h)
    reply = h.read()[0] if h.client.poll(2000) else None
    assert reply is not None, "rank 1 waits for the timeout for a noted rank whose process ended"
    assert reply["error"].startswith(f"{TOLD}; its process (pid {worker.pid}, on this"), reply
    assert reply["refused"] == "job" and (h.shard.failed, h.shard.lost) == (None, set())


def test_a_noted_rank_that_closed_a_run_before_is_blamed_at_the_timeout(hand):
    """Rank 0 (on another host: no process seen) closed a run before its next fit failed
    before setup; rank 1's refit waits for it: the timeout blames rank 0 (``failed_ranks``),
    not that it "closed" (a plain failure, which the worker ended with exit 1, no one's)."""
    h = hand(workers=2, mode="sync", timeout=0.5)
    _closed_a_run_before(h)
    _noted_and_told(h, None)
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    assert _gather(h, "all_equal:2") is None
    time.sleep(0.6)  # the gather's timeout
    h.shard._check_timeouts(time.monotonic())
    reply = h.read()[0]
    assert reply["failed_ranks"] == [0] and "closed" not in reply["error"], reply
    assert reply["error"].startswith("rank 0 (host "), reply


def test_a_note_after_its_rank_closed_a_run_before_is_no_silence(hand):
    """Async: rank 0 closed a run longer than --timeout before its next fit's note: the note
    makes it no silent rank (its last request of that run is not its last sign of life)."""
    h = hand(workers=2, mode="async", timeout=0.5)
    _closed_a_run_before(h)
    time.sleep(0.6)
    assert _hello(h, 1, 11, GOOD)["op"] == "ok"
    note = hello_fields(setup_failure_description(0, "ValueError: an empty set"))
    assert _hello(h, 0, 10, note)["error"] == TOLD  # its bye not come yet
    h.shard._check_timeouts(time.monotonic())
    assert (h.shard.failed, h.shard.lost) == (None, set())


def test_going_on_without_a_lost_rank_a_noted_process_ending_answers_a_rank_never_joined(
    hand,
    sleeper,  # noqa: F811
):
    """Async with ``--on-worker-loss continue``: rank 0 is told of rank 1's note in its job
    check (rank 1 never set up), fits again and waits; rank 1's process ends: the timeout
    would fail the job, not lose rank 1 (it never joined), so the end answers the wait."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=LONG)
    worker = sleeper()
    assert _hello(h, 0, 10, GOOD)["op"] == "ok"
    note = hello_fields(setup_failure_description(1, "ValueError: an empty set"))
    said = "rank 1 could not set up: ValueError: an empty set"
    assert _hello(h, 1, 11, note, worker.pid)["error"] == said
    assert h.ask({"op": "bye", "rank": 1, "run": 11})[0]["op"] == "ok"
    gather = {"op": "gather", "rank": 0, "tag": "all_equal:1", "value": "d"}
    assert h.answer(gather)["error"] == said
    assert _hello(h, 0, 10, GOOD)["op"] == "ok"
    assert h.answer({**gather, "tag": "all_equal:2"}) is None
    _kill(worker)
    _two_looks(h)
    reply = h.read()[0] if h.client.poll(2000) else None
    assert reply is not None, "rank 0 waits for the timeout, which fails the job"
    assert reply["error"].startswith(f"{said}; its process (pid {worker.pid}, on this"), reply
    assert (h.shard.failed, h.shard.lost, h.shard.gathers_held) == (None, set(), set())
