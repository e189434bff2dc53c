"""A rank whose ``bye`` says the ranks run different jobs (a ``JobRefused`` it heard from
another shard) fails no rank, and the failure it leads is a refusal of the job; but only where
no rank gone failed on its own, and a rank that failed on its own is named and blamed whatever the
others heard:

- the timeout of a held request missing such a rank was a plain failure (``SyncError``, exit 1
  with a traceback, the launcher restarting on it again and again), its words only quoted;
- a step left behind by two ranks read the lowest-numbered one's bye alone: a rank that closed
  on the mismatch it heard hid one that raised on its own, which was neither named nor blamed;
- a bye carrying ``failed_ranks`` (a ``PeerFailed`` from another shard) whose text leads with
  those words blamed no rank here, while the shard that failed first blamed its ranks;
- a gather left stuck by two ranks led with the words of the first gone on the mismatch and
  carried ``refused: "job"`` while it blamed another that raised on its own.

A rank gone with no error (it trained fewer steps) beside one gone on the mismatch leaves a
refusal too: no rank failed, and a restart would stop on the mismatch again.

Each on a real shard on 127.0.0.1 port 0 handed its requests one by one (:mod:`hand_shard`):
the orders here are ones a real run reaches only by chance."""

from __future__ import annotations

import time

import pytest
from test_ps_stuck import _gather, _hello_run, _push_w

from distconv.messages import described
from distconv.rank_endings import different_jobs_text
from distconv.sync import JobRefused
from distconv.sync.peers import PeerFailed
from distconv.sync.ps.refusals import START_ENDED

#: what a rank whose hello another shard refused as another job's heard, and says bye with
WORDS = different_jobs_text(1, 0, "config.batch: 9 here, 8 there")
HEARD = described(JobRefused(f"rank 1, hello: pserver 127.0.0.1:1: {WORDS}"))


def _replies(h, count: int) -> dict[str, dict]:
    """The next ``count`` reply headers by their ``op`` (a bye's ``ok``, a held one's error)."""
    return {head["op"]: head for head, _ in (h.read() for _ in range(count))}


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


def _three_ranks_seeded(h) -> None:
    for rank, run in ((0, 5), (1, 11), (2, 17)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    h.seed()


@pytest.mark.timeout(30)
def test_a_rank_that_failed_is_blamed_whatever_another_gone_rank_heard(hand):
    """Rank 2 closes on its own error, rank 0 on the mismatch it heard; then rank 1's push of a
    step neither pushed is held: the step fails blaming rank 2 and naming both, no refusal
    (rank 0, the lowest, decided alone: a refusal of the job, blaming no rank)."""
    h = hand(workers=3)
    _three_ranks_seeded(h)
    h.send({"op": "bye", "rank": 2, "run": 17, "error": described(ValueError("loss is nan"))})
    h.send({"op": "bye", "rank": 0, "run": 5, "error": HEARD})
    _push_w(h, 1, 1)
    reply = _replies(h, 3)["error"]
    assert 'closed on "ValueError: loss is nan"' in reply["error"], reply
    assert 'closed on "JobRefused: rank 1, hello' in reply["error"], reply
    assert not reply["error"].startswith(WORDS), reply  # the launcher would read a mismatch
    assert reply.get("failed_ranks") == [2] and "refused" not in reply, reply


@pytest.mark.timeout(30)
@pytest.mark.parametrize("rank_2_said", [HEARD, None], ids=["mismatch", "fewer-steps"])
def test_a_step_left_by_ranks_that_all_closed_on_different_jobs_is_a_refusal(hand, rank_2_said):
    """Ranks 0 and 2 gone, rank 0 on the mismatch and rank 2 on it too or with no error (it
    trained fewer steps: no rank failed): a refusal of the job, naming both."""
    h = hand(workers=3)
    _three_ranks_seeded(h)
    error = {"error": rank_2_said} if rank_2_said else {}
    h.send({"op": "bye", "rank": 2, "run": 17, **error})
    h.send({"op": "bye", "rank": 0, "run": 5, "error": HEARD})
    _push_w(h, 1, 1)
    reply = _replies(h, 3)["error"]
    assert reply["error"].startswith(f"{WORDS}; rank 0 (host h"), reply
    assert "rank 2 (host h" in reply["error"], reply  # named too
    assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply


@pytest.mark.timeout(30)
def test_a_bye_naming_failed_ranks_blames_them_whatever_its_words(hand):
    """Rank 0 closed on a ``PeerFailed`` that shard 0 led with the mismatch but blamed rank 2
    in (a stuck gather's, a rank gone on its own error beside one gone on the mismatch): this
    shard blames rank 2 as well, not a refusal of the job; both shards' replies agree."""
    h = hand(workers=3)
    _three_ranks_seeded(h)
    peer = PeerFailed(f"rank 0, barrier:2: pserver 127.0.0.1:1: {WORDS}; ranks are at ...", [2])
    h.send({"op": "bye", "rank": 0, "run": 5, "error": described(peer), "failed_ranks": [2]})
    _push_w(h, 1, 1)
    reply = _replies(h, 2)["error"]
    assert reply.get("failed_ranks") == [2] and "refused" not in reply, reply
    assert not reply["error"].startswith(WORDS), reply


def _three_ranks_met(h) -> None:
    """Ranks 0, 1 and 2 say hello and meet in the start-up gather, which is answered."""
    for rank, run in ((0, 5), (1, 11), (2, 17)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    for rank in range(3):
        _gather(h, rank, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(3)] == ["ok"] * 3


@pytest.mark.timeout(30)
def test_a_gather_left_by_a_rank_that_failed_is_no_refusal_whatever_another_heard(hand):
    """Rank 2 closes on its own error, rank 1 on the mismatch it heard; then rank 0 waits at a
    barrier: stuck at once, blaming rank 2, and no refusal of the job, nor led by the words
    (the launcher would read a mismatch: no restart), as a step left behind reads them. It was
    led by rank 1's words, the lower, with ``refused: "job"`` beside rank 2 blamed: every
    worker's line read as the mismatch."""
    reply = _gather_left_by(hand, {"error": described(ValueError("loss is nan"))})
    assert reply["error"].startswith("ranks are at different points of the job"), reply
    assert (
        'rank 1 (host h, no step since its hello): closed on "JobRefused: rank 1' in reply["error"]
    )
    assert "refused" not in reply, reply
    assert reply.get("failed_ranks") == [2], reply


@pytest.mark.timeout(30)
def test_a_gather_left_by_a_rank_of_fewer_steps_and_one_on_the_mismatch_is_a_refusal(hand):
    """Rank 2 closes with no error (it trained fewer steps: no rank failed), rank 1 on the
    mismatch it heard: a refusal of the job, led by the words. It was a failure neither blamed
    nor refused: rank 0 raised a plain SyncError (a traceback) and the launcher, where rank 0
    exited first, restarted a job every attempt of which stopped on the mismatch again."""
    reply = _gather_left_by(hand, {})
    assert reply["error"] == f"{WORDS}; {START_ENDED}", reply  # nothing seeded: a start ended
    assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply


@pytest.mark.timeout(30)
def test_a_lost_rank_that_said_bye_leaves_a_gather_refused(hand):
    """An async rank declared lost, then its bye, beside rank 1 gone on the mismatch: the
    lost rank is no rank gone from the gather (the message names the live ones), so the
    failure is still the refusal; it blocked it, and with an error was blamed unnamed."""
    h = hand(workers=3, mode="async", on_worker_loss="continue")
    _three_ranks_met(h)
    h.shard._lose(2, "rank 2 silent")
    reply = _gather_left_by(h, {"error": described(ValueError("loss is nan"))}, met=True)
    assert reply["error"] == f"{WORDS}; {START_ENDED}", reply  # nothing seeded: a start ended
    assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply


def _gather_left_by(hand, rank_2_bye: dict, met: bool = False) -> dict:
    """Rank 2 says bye with ``rank_2_bye``'s fields, rank 1 on the mismatch it heard, then
    rank 0 gathers at a barrier: the gather's error reply (``hand`` a shard that ``met``
    already, else made here with three workers that meet)."""
    h = hand if met else hand(workers=3)
    if not met:
        _three_ranks_met(h)
    h.send({"op": "bye", "rank": 2, "run": 17, **rank_2_bye})
    h.send({"op": "bye", "rank": 1, "run": 11, "error": HEARD})
    _gather(h, 0, "barrier:2")
    return _replies(h, 3)["error"]


@pytest.mark.timeout(30)
def test_a_gather_left_by_ranks_that_all_closed_on_different_jobs_is_a_refusal(hand):
    """Both ranks gone closed on the mismatch they heard: still led by the words, a refusal
    of the job, blaming no rank."""
    h = hand(workers=3)
    _three_ranks_met(h)
    for rank, run in ((2, 17), (1, 11)):
        h.send({"op": "bye", "rank": rank, "run": run, "error": HEARD})
    _gather(h, 0, "barrier:2")
    reply = _replies(h, 3)["error"]
    assert reply["error"] == f"{WORDS}; {START_ENDED}", reply  # nothing seeded: a start ended
    assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply
