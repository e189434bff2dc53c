"""A push of a step that a rank abandoned and went past fails that step at once, naming the
abandon, not as a refused push of the rank that pushed it.

Rank 0's step 1 raised before any push; the Trainer abandoned it (telling the shard), and the
script went on to step 2, whose push the shard holds. Rank 1, slower, then pushes step 1:
refused as "shard is collecting step 2", as a malformed push of rank 1's would be, the job not
failed. Rank 1 stopped on that error, and its bye (or abandon) blamed rank 1, whose only fault
was to wait for rank 0's step 1; rank 0's held push waited out the timeout. The step can never
complete: it fails now as the abandoned step it is, blaming rank 0. A real shard on 127.0.0.1
port 0 handed its requests one by one (:mod:`hand_shard`)."""

from __future__ import annotations

import pytest
from test_ps_stuck import _hello_run, _meet, _push_w

#: the error rank 0's step 1 raised, which its abandon carries
CUT = "DataError: a bad batch"


def _two_ranks_seeded(h) -> None:
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    h.seed()


@pytest.mark.timeout(30)
def test_a_push_of_a_step_its_rank_abandoned_and_passed_fails_the_step(hand):
    h = hand(workers=2)
    _two_ranks_seeded(h)
    h.send({"op": "abandon", "rank": 0, "run": 5, "step": 1, "error": CUT})
    assert h.read()[0]["op"] == "ok"
    _push_w(h, 0, 2)  # held: rank 1 has not pushed step 2
    assert not h.shard.failed, h.shard.failed
    _push_w(h, 1, 1)
    replies = {r["id"]: r for r in (h.read()[0] for _ in range(2))}
    said = f'rank 0 (host h, last step 2) abandoned step 1 on "{CUT}"; rank 1 (step 1) waits '
    said += "for its push, and the step cannot complete without it"
    assert h.shard.failed == said
    for reply in replies.values():  # rank 0's held push of step 2, and rank 1's of step 1
        assert reply["op"] == "error" and reply["error"] == said, replies
        assert reply.get("failed_ranks") == [0] and "refused" not in reply, replies
    assert not h.client.poll(200)  # one reply each


@pytest.mark.timeout(30)
def test_a_push_of_another_step_than_the_one_collected_is_still_refused(hand):
    """Without an abandon of its step, a push of a step the shard does not collect is a
    refused push, as before: the job goes on (rank 1's worker was behind, or a bug)."""
    h = hand(workers=2)
    _two_ranks_seeded(h)
    _push_w(h, 0, 2)
    _push_w(h, 1, 1)
    reply = h.read()[0]
    assert reply["error"] == "rank 1 pushed w for step 1, shard is collecting step 2", reply
    assert not h.shard.failed, h.shard.failed
