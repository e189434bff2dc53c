"""An ``abandon`` note counts for the step it names alone: a held push of a later step waits
for its rank while it is alive.

Rank 0 pushed its whole step 1 to the shard, then its step raised (an error after its pushes:
the Trainer abandons the step, telling the shards), and rank 1's push completed step 1 all the
same. Rank 0's script caught the error and went on to step 2. A real shard on 127.0.0.1 port
0 handed its requests one by one (:mod:`hand_shard`)."""

from __future__ import annotations

import pytest
from test_ps_stuck import _hello_run, _meet, _push_w

#: the error rank 0's step 1 raised, which its abandon carries
CUT = "DataError: a bad batch"


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
