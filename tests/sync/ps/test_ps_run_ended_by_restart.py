"""A rank's hello of a new run ends the seeded run its worker left without a bye: the shard's
rules, with the order of arrival pinned (a shard handed its requests one by one). The real
workers' side is ``test_ps_worker_restarted_alone.py``."""

from __future__ import annotations

import time

import pytest
from test_ps_stuck import _bye, _gather, _hello_run, _meet, _push_w

from distconv.sync.ps.job_hello import hello_fields

#: rank 2's restart, as every shard of the job tells the ranks of the run it ended
ENDED = (
    "rank 2 started again (a newer worker said hello from host h): its worker of this run "
    "ended without a bye (killed or crashed), so the run cannot go on and every worker restarts"
)


def _seeded_run(hand, **config):
    """Three ranks (runs 10, 11, 12) said hello, met in the start-up gather, and are seeded."""
    h = hand(workers=3, **config)
    for rank in range(3):
        assert _hello_run(h, rank, 10 + rank)["op"] == "ok"
    _meet(h, range(3))
    h.seed()
    return h


def _answers(h, count: int) -> list[dict]:
    return [h.read()[0] for _ in range(count)]


@pytest.mark.timeout(30)
def test_a_restart_answers_the_run_s_held_requests_and_refuses_its_later_ones(hand):
    """Ranks 0 and 1 wait in step 1 for rank 2's push, which never comes: rank 2's new worker
    says hello. Their pushes are answered at once, blaming rank 2 (exit 75), and so is every
    later request of that run, even after another rank of it restarted too; the shard has not
    failed, and the new run meets, with rank 2, and trains."""
    h = _seeded_run(hand)
    _push_w(h, 0, 1)
    _push_w(h, 1, 1)
    assert not h.client.poll(200)  # held: rank 2's push is missing
    dropped = _hello_run(h, 2, 22)  # the held pushes' answers come before the hello's
    answers = [dropped, *_answers(h, 2)]
    step = f"{ENDED}; this worker's step 1 is dropped"
    assert [(a["op"], a.get("error"), a.get("failed_ranks")) for a in answers] == [
        ("error", step, [2]),
        ("error", step, [2]),
        ("ok", None, None),
    ], answers
    assert not h.shard.waiting and not h.shard.failed
    later = h.answer({"op": "gather", "rank": 1, "tag": "barrier:2", "value": None, "run": 11})
    assert later == {**later, "error": f"{ENDED}; this worker's gather is refused"}, later
    assert later["failed_ranks"] == [2]
    assert _hello_run(h, 1, 21)["op"] == "ok"  # rank 1 restarts: rank 2's words still stand
    _push_w(h, 0, 2)
    assert h.read()[0]["error"] == f"{ENDED}; this worker's push is refused"
    assert _hello_run(h, 0, 20)["op"] == "ok"
    _meet(h, (2, 1, 0))  # rank 2's new worker waited first: taken in
    assert h.seed() == []
    for rank in range(3):
        _push_w(h, rank, 1)
    assert [a["op"] for a in _answers(h, 3)] == ["ok"] * 3
    assert h.shard.completed == {0: 1} and not h.shard.failed


def _second_setup(h) -> None:
    assert _hello_run(h, 2, 12)["op"] == "ok"


def _no_run(h) -> None:
    assert h.ask({"op": "hello", "rank": 2, "host": "h", **hello_fields({})})[0]["op"] == "ok"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("hello", [_second_setup, _no_run], ids=["second-setup", "no-run-id"])
def test_a_hello_that_may_be_of_the_same_worker_ends_nothing(hand, hello):
    """A second ``setup`` of rank 2's worker (its run), or a hello without a run id (a worker
    of an older release: its every hello looks new), is no sure restart: the pushes wait on."""
    h = _seeded_run(hand)
    _push_w(h, 0, 1)
    hello(h)
    assert not h.client.poll(200) and len(h.shard.waiting) == 1 and h.shard.ended_run is None


@pytest.mark.timeout(30)
def test_a_restart_before_the_seed_is_taken_in(hand):
    """Rank 2's worker died before the start-up gather met: its new worker joins the gather
    ranks 0 and 1 wait in, as before, and nothing is refused."""
    h = hand(workers=3)
    for rank in range(3):
        assert _hello_run(h, rank, 10 + rank)["op"] == "ok"
    for rank in (0, 1):
        _gather(h, rank, "all_equal:1")
    assert _hello_run(h, 2, 22)["op"] == "ok"
    _gather(h, 2, "all_equal:1")
    assert [a["op"] for a in _answers(h, 3)] == ["ok"] * 3
    assert h.shard.ended_run is None


@pytest.mark.timeout(30)
def test_a_rank_that_said_bye_is_left_to_the_bye_s_rules(hand):
    """Rank 2's worker closed on an error (its bye): the held step fails at once, naming it,
    as before; its later hello, refused by the failed shard, ends no run."""
    h = _seeded_run(hand)
    _push_w(h, 0, 1)
    _bye(h, 2, run=12, error="MemoryError: out of memory")
    failed = h.read()[0]
    assert failed["failed_ranks"] == [2] and "out of memory" in failed["error"], failed
    assert _hello_run(h, 2, 22)["op"] == "error" and h.shard.ended_run is None


@pytest.mark.timeout(30)
@pytest.mark.parametrize("loss", ["fail", "continue"])
def test_async_a_restart_ends_the_run_too(hand, loss):
    """Async: rank 0 waits at the epoch's end (a barrier) when rank 2's new worker says hello,
    whose start-up gather can never meet it; under ``--on-worker-loss continue`` too, where a
    rank that lives and waits in another gather is not lost: the gather failed the job at the
    timeout. It is answered at once; rank 1's next push is refused."""
    h = _seeded_run(hand, mode="async", on_worker_loss=loss)
    _gather(h, 0, "barrier:2")
    dropped = _hello_run(h, 2, 22)
    assert dropped["error"] == f"{ENDED}; this worker's barrier:2 is dropped", dropped
    assert h.read()[0]["op"] == "ok" and not h.shard.gathers_held
    _push_w(h, 1, 5)
    refused = h.read()[0]
    assert refused["error"] == f"{ENDED}; this worker's push is refused", refused
    assert refused["failed_ranks"] == [2] and not h.shard.failed


@pytest.mark.timeout(30)
def test_the_restarted_worker_ends_at_the_timeout_if_the_others_never_come(hand):
    """The others were told and closed, and never come back: the restarted rank's start-up
    gather is answered at the timeout, naming them, as any gather's, and blaming rank 2, as
    their byes did (the new worker, named itself, stops on an error of its own: exit 1)."""
    h = _seeded_run(hand, timeout=0.3)
    _push_w(h, 0, 1)
    _hello_run(h, 2, 22)
    assert h.read()[0]["op"] == "ok"  # the hello, after the push's answer
    for rank in (0, 1):
        _bye(h, rank, run=10 + rank, error="PeerFailed: ...", failed_ranks=[2])
    _gather(h, 2, "all_equal:1")
    assert not h.client.poll(200)
    time.sleep(0.3)
    h.shard._check_timeouts(time.monotonic())
    timed_out = h.read()[0]
    assert "sent nothing for all_equal:1" in timed_out["error"], timed_out
    assert timed_out["failed_ranks"] == [2], timed_out


@pytest.mark.timeout(30)
@pytest.mark.parametrize("index", [0, 1])
def test_a_lost_rank_s_restart_ends_nothing_under_continue(hand, index):
    """Async with ``--on-worker-loss continue``: rank 2 fell silent and was lost, and the job
    went on without it, as chosen. Its restarted worker is refused by shard 0; another shard
    takes its hello in (it holds no gather), and must not end the run there: ranks 0 and 1
    go on pushing to it. (It ended the run, and both stopped with exit 75, naming rank 2.)"""
    loss = {"mode": "async", "on_worker_loss": "continue", "timeout": 0.3}
    h = hand(workers=3, shard=index, num_shards=2, **loss)
    for rank in range(3):
        assert _hello_run(h, rank, 10 + rank)["op"] == "ok"
    h.seed()
    time.sleep(0.4)
    for rank in (0, 1):  # alive: their beats
        assert h.ask({"op": "beat", "rank": rank, "run": 10 + rank})[0]["op"] == "ok"
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.lost == {2} and not h.shard.failed
    hello = _hello_run(h, 2, 22)
    assert (hello["op"] == "error") == (index == 0), hello  # "declared lost" on shard 0 alone
    for rank in (0, 1):
        _push_w(h, rank, 5)
        pushed = h.read()[0]
        assert pushed["op"] == "ok", pushed
    assert h.shard.ended_run is None and not h.shard.failed


def _set_up_again(h) -> None:
    """Ranks 0 and 1 set up again (a second ``setup``: their runs), waiting in its gather."""
    for rank in (0, 1):
        assert _hello_run(h, rank, 10 + rank)["op"] == "ok"
        _gather(h, rank, "all_equal:1")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("told", [True, False], ids=["after-the-restart", "before-it"])
def test_a_worker_that_sets_up_again_meets_the_restarted_one(hand, told):
    """A script that fits again on ranks 0 and 1 (a second ``setup`` of their workers), told
    of rank 2's restart first or not: their start-up gather meets the restarted worker's, and
    the job goes on (docs/protocol.md, "What these rules cannot tell apart"). All their requests
    were refused as of the ended run, or the restart dropped their gather, naming itself."""
    h = _seeded_run(hand)
    if told:
        _push_w(h, 0, 1)
        assert "step 1 is dropped" in _hello_run(h, 2, 22)["error"]
        assert h.read()[0]["op"] == "ok"
        _set_up_again(h)
    else:
        _set_up_again(h)
        assert _hello_run(h, 2, 22)["op"] == "ok"
    assert not h.client.poll(200)  # held: rank 2's gather is missing
    _gather(h, 2, "all_equal:1")
    assert [a["op"] for a in _answers(h, 3)] == ["ok"] * 3
    assert h.seed() == []
    for rank in range(3):
        _push_w(h, rank, 1)
    assert [a["op"] for a in _answers(h, 3)] == ["ok"] * 3
    assert not h.shard.failed
