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


@pytest.mark.timeout(30)
@pytest.mark.parametrize("first", ["rank-0-first", "rank-1-first"])
def test_a_rank_that_abandoned_two_steps_in_a_row_fails_the_first_too(hand, first):
    """Rank 0's steps 1 and 2 both raised before any push (two bad batches; the script goes on
    each time), and it pushes step 3. The shard kept its latest note alone (step 2): rank 1's
    push of step 1 was refused as "shard is collecting step 3" where rank 0's push came first,
    and held until the timeout where it came first (rank 0's push of step 3 then refused,
    blaming rank 0 for "collecting step 1"). Step 1 fails, naming its own abandon."""
    h = hand(workers=2)
    _two_ranks_seeded(h)
    for step, error in ((1, CUT), (2, "DataError: another bad batch")):
        h.send({"op": "abandon", "rank": 0, "run": 5, "step": step, "error": error})
        assert h.read()[0]["op"] == "ok"
    pushes = [lambda: _push_w(h, 0, 3), lambda: _push_w(h, 1, 1)]
    for push in pushes if first == "rank-0-first" else pushes[::-1]:
        push()
    said = f'abandoned step 1 on "{CUT}"; rank 1 (step 1) waits for its push, and the step '
    said += "cannot complete without it"
    assert h.shard.failed and h.shard.failed.endswith(said), h.shard.failed
    for _ in range(2):  # each push answered once, with the failure
        reply = h.read()[0]
        assert reply["op"] == "error" and reply["error"] == h.shard.failed, reply
        assert reply.get("failed_ranks") == [0], reply
    assert not h.client.poll(200)


def _abandon(h, rank: int, step: int) -> None:
    h.send({"op": "abandon", "rank": rank, "run": 5 if rank == 0 else 11, "step": step})
    assert h.read()[0]["op"] == "ok"


@pytest.mark.timeout(30)
def test_the_notes_before_the_latest_go_at_hello_and_once_every_rank_went_past(hand):
    """The notes a rank's latest came after are kept while another rank may still push their
    step here (it pushed no later one), and forgotten, with the latest, at the rank's hello: a
    push of such a step then waits for the rank as any push does."""
    h = hand(workers=2)
    _two_ranks_seeded(h)
    for rank in (0, 1):  # both abandon step 1, and step 2 completes
        _abandon(h, rank, 1)
    _push_w(h, 0, 2)
    _push_w(h, 1, 2)
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]
    _abandon(h, 0, 3)
    assert sorted(h.shard._notes_of(0)) == [3]  # rank 1 pushed step 2: none pushes step 1
    _abandon(h, 0, 4)
    assert sorted(h.shard._notes_of(0)) == [3, 4]
    assert _hello_run(h, 0, 5)["op"] == "ok"  # a second setup of rank 0's worker
    assert h.shard._notes_of(0) == {}
    _abandon(h, 0, 6)
    assert sorted(h.shard._notes_of(0)) == [6]
    _push_w(h, 1, 3)
    assert not h.shard.failed, h.shard.failed
    assert not h.client.poll(200)  # held: rank 0's step 3 is no longer known abandoned
