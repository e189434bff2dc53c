"""Whom a step an ``abandon`` left behind blames, and what leads its failure: the rules of a
``bye`` (``tests/sync/ps/test_ps_bye_different_jobs.py``), as docs/protocol.md says ("a
``bye`` (or an ``abandon``, by the same rules)"). The abandon now comes before the bye, so the
shard fails the step on it, and the bye that follows changes nothing.

Each on a real shard on 127.0.0.1 port 0 handed its requests one by one (:mod:`hand_shard`)."""

from __future__ import annotations

import pytest
from test_ps_bye_different_jobs import HEARD, WORDS, _three_ranks_seeded
from test_ps_stuck import _push_w

from distconv.messages import described
from distconv.sync.peers import PeerFailed

ENDINGS = ["bye", "abandon"]


def _left(h, rank: int, run: int, how: str, **fields) -> None:
    """Rank ``rank`` (of run ``run``) leaves step 1: says bye, or abandons it, with
    ``fields`` (its ``error``, its ``failed_ranks``)."""
    h.send({"op": how, "rank": rank, "run": run, **({"step": 1} if how == "abandon" else {})}
           | fields)  # fmt: skip


def _failure(h) -> dict:
    """The error reply of rank 1's push of step 1, held, after the ending's ``ok``."""
    _push_w(h, 1, 1)
    replies = [h.read()[0] for _ in range(2)]
    [reply] = [r for r in replies if r["op"] == "error"]
    return reply


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ENDINGS)
def test_a_rank_that_heard_the_ranks_run_different_jobs_leads_a_refusal(hand, how):
    """Rank 0 heard the mismatch (a ``JobRefused``) and left step 1 on it: no rank failed,
    and the failure of the step it left is a refusal of the job (``refused: "job"``), led by
    the words, blaming none, whether it said bye or abandoned the step. After an abandon it
    was a plain failure, blaming none: the launcher restarted on it, as it does on a failure."""
    h = hand(workers=3)
    _three_ranks_seeded(h)
    _left(h, 0, 5, how, error=HEARD)
    _push_w(h, 2, 1)  # rank 2's push, held beside rank 1's
    reply = _failure(h)
    assert reply["error"].startswith(f"{WORDS}; rank 0 (host h"), reply
    assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ENDINGS)
def test_a_rank_told_of_another_rank_failure_blames_that_rank(hand, how):
    """Rank 0 left step 1 on a ``PeerFailed`` naming rank 2 (another shard failed first):
    rank 2 is blamed, not rank 0, whatever the words."""
    h = hand(workers=3)
    _three_ranks_seeded(h)
    peer = PeerFailed(f"rank 0, step 1: pserver 127.0.0.1:1: {WORDS}; ...", [2])
    _left(h, 0, 5, how, error=described(peer), failed_ranks=[2])
    reply = _failure(h)
    assert reply.get("failed_ranks") == [2] and "refused" not in reply, reply
    assert not reply["error"].startswith(WORDS), reply


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ENDINGS)
def test_failed_ranks_without_an_error_blame_no_rank(hand, how):
    """A request naming ``failed_ranks`` but no ``error`` (no distconv sends one) blames no
    rank, as for a bye: it said of no failure."""
    h = hand(workers=3)
    _three_ranks_seeded(h)
    _left(h, 0, 5, how, failed_ranks=[2])
    reply = _failure(h)
    assert "failed_ranks" not in reply, reply


@pytest.mark.timeout(30)
def test_a_rank_that_abandoned_on_its_own_error_is_blamed_whatever_a_gone_rank_heard(hand):
    """Rank 0 closed on the mismatch it heard, rank 2 abandoned step 1 on an error of its own:
    rank 1's push of step 1 fails blaming rank 2, naming both, led by no refusal."""
    h = hand(workers=3)
    _three_ranks_seeded(h)
    _left(h, 0, 5, "bye", error=HEARD)
    assert h.read()[0]["op"] == "ok"
    _left(h, 2, 17, "abandon", error="ValueError: loss is nan")
    reply = _failure(h)
    assert reply["error"].startswith(
        'rank 0 (host h, no step since its hello) closed on "JobRefused: '
    ), reply
    assert reply["error"].endswith(
        '; rank 2 (host h, no step since its hello) abandoned step 1 on "ValueError: '
        'loss is nan"; rank 1 '
        "(step 1) waits for their pushes, and the step cannot complete without them"
    ), reply
    assert reply.get("failed_ranks") == [2] and "refused" not in reply, reply
