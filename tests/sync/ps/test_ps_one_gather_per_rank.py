"""A rank waits in one gather at a time. Shard 0 held every gather a rank sent
with a new tag until the timeout, while the other ranks were in none: one client could post
``allreduce:1``, ``allreduce:2``, ... each with up to a MiB of ``value`` and grow shard 0's
memory by GBs. A second gather of a rank with one held is refused; the held one still meets
the other ranks' as before. In-process shard."""

from __future__ import annotations

import pytest
from test_ps_hello_description import GOOD


@pytest.mark.timeout(60)
def test_a_second_gather_of_a_rank_is_refused_and_the_first_still_meets(hand):
    h = hand(workers=2)
    for rank in (0, 1):
        assert h.answer({"op": "hello", "rank": rank, "host": "h", **GOOD})["op"] == "ok"
    assert h.answer({"op": "gather", "tag": "barrier:1", "value": None}) is None
    value = ["x" * 1000] * 100
    for n in range(2, 12):
        reply = h.answer({"op": "gather", "tag": f"allreduce:{n}", "value": value})
        assert reply is not None and reply["op"] == "error", reply
        assert reply["error"] == (
            f"rank 0 sent gather 'allreduce:{n}' while its 'barrier:1' is held: "
            "a worker waits in one gather at a time"
        )
    assert h.shard.gathers_held == {"gather:barrier:1"}
    assert not h.shard.failed
    h.send({"op": "gather", "rank": 1, "tag": "barrier:1", "value": None})
    replies = [h.read()[0] for _ in range(2)]  # rank 0's and rank 1's, on one client
    assert [r["op"] for r in replies] == ["ok", "ok"] and not h.shard.gathers_held, replies
    # a next gather, once the first was answered, is held as before
    assert h.answer({"op": "gather", "tag": "allreduce:2", "value": [1.0]}) is None
