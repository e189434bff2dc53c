"""An ``abandon`` note counts for the step it names alone: a held push of another step waits
for its rank while it is alive, and where it closed since, that push names its bye.

Rank 0 pushed its whole step 1 to the shard, then its step raised (an error after its pushes:
the Trainer abandons the step, telling the shards), and rank 1's push completed step 1 all the
same. Rank 0's script caught the error and went on to step 2, or ended, saying bye (without an
error: it trained fewer steps; or with one of its own). Where it ended, rank 1's push of step 2
failed naming rank 0's abandon of step 1, a step that completed, and blamed rank 0 for that
error, where its bye said it closed without one. A real shard on 127.0.0.1 port 0 handed its
requests one by one (:mod:`hand_shard`)."""

from __future__ import annotations

import pytest
from test_ps_stuck import _hello_run, _meet, _push_w

#: the error rank 0's step 1 raised, which its abandon carries
CUT = "DataError: a bad batch"
#: how the shard names rank 0
RANK_0 = "rank 0 (host h, last step 1)"
#: the rest of the failure: rank 1 waits
WAITS = "rank 1 ({}) waits for its push, and the step cannot complete without it"


def _rank_0_abandons_step_1(h, bye: dict | None, pushed: bool) -> None:
    """Ranks 0 and 1 meet and rank 0 seeds; rank 0 abandons step 1 (after pushing it where
    ``pushed``: rank 1's push then completes it) and says bye with ``bye``'s fields (None:
    it goes on, alive)."""
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    h.seed()
    if pushed:
        _push_w(h, 0, 1)
    h.send({"op": "abandon", "rank": 0, "run": 5, "step": 1, "error": CUT})
    assert h.read()[0]["op"] == "ok"  # the abandon's
    if pushed:
        _push_w(h, 1, 1)
        assert {h.read()[0]["op"] for _ in range(2)} == {"ok"}  # step 1 completed
    if bye is not None:
        h.send({"op": "bye", "rank": 0, "run": 5, **bye})
        assert h.read()[0]["op"] == "ok"
    assert not h.shard.failed, h.shard.failed


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "bye, said, blamed",
    [
        ({}, "closed", None),
        ({"error": "ValueError: loss is nan"}, 'closed on "ValueError: loss is nan"', [0]),
    ],
    ids=["closed", "closed-on-an-error"],
)
def test_a_later_step_left_behind_names_the_bye_not_an_earlier_abandon(hand, bye, said, blamed):
    h = hand(workers=2)
    _rank_0_abandons_step_1(h, bye, pushed=True)
    _push_w(h, 1, 2)
    reply = h.read()[0]
    assert reply["op"] == "error", reply
    assert reply["error"] == f"{RANK_0} {said}; {WAITS.format('step 2')}", reply
    assert reply.get("failed_ranks") == blamed and "refused" not in reply, reply


@pytest.mark.timeout(30)
def test_the_abandoned_step_left_behind_still_names_the_abandon(hand):
    """The step rank 0 abandoned, never pushed, is what rank 1 waits in: named by the note,
    its error blamed, whatever the bye after it said."""
    h = hand(workers=2)
    _rank_0_abandons_step_1(h, {}, pushed=False)
    _push_w(h, 1, 1)
    reply = h.read()[0]
    said = f'rank 0 (host h, no step since its hello) abandoned step 1 on "{CUT}"'
    assert reply["error"] == f"{said}; {WAITS.format('step 1')}", reply
    assert reply.get("failed_ranks") == [0] and "refused" not in reply, reply


@pytest.mark.timeout(30)
def test_a_rank_alive_after_its_abandon_is_waited_for_in_a_later_step(hand):
    """Rank 0, alive, went on to step 2 after abandoning step 1: rank 1's push of step 2 waits
    for its push, which completes the step; the note fails nothing."""
    h = hand(workers=2)
    _rank_0_abandons_step_1(h, None, pushed=True)
    _push_w(h, 1, 2)
    assert not h.shard.failed, h.shard.failed
    _push_w(h, 0, 2)
    replies = [h.read()[0] for _ in range(2)]
    assert [r["op"] for r in replies] == ["ok", "ok"], replies
    assert [r["versions"] for r in replies] == [[2] * 4] * 2, replies  # step 2 applied
