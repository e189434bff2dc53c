"""A sync step left behind by a rank whose place a worker of another job id then claimed fails
as that refusal of the job, not as the rank's bye alone.

Rank 1 said bye, a stray of job 'job8' was refused for rank 1 (nothing waited then), and rank
0's push of step 1 then waits for rank 1's. Both the step left behind (the rank closed) and the
refusal (no worker of this job holds rank 1) explain the wait; the step's check ran first and
said only that rank 1 closed, dropping the cause that stops any restart. A rank that closed on
an error of its own is still blamed: the failure is its, and the refused stray goes away. A
real shard, handed its requests one by one."""

from __future__ import annotations

import pytest
from test_ps_bye_different_jobs import _three_ranks_seeded
from test_ps_other_job_id_waiters import WAITERS, _other_id_hello
from test_ps_stuck import _bye, _hello_run, _meet, _push_w


@pytest.mark.timeout(30)
@pytest.mark.parametrize("error", ["", "boom"], ids=["closed", "closed-on-an-error"])
def test_a_step_left_behind_by_a_rank_claimed_by_another_id_names_the_refusal(hand, error):
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    h.seed()
    _bye(h, 1, run=11, **({"error": error} if error else {}))
    assert _other_id_hello(h) == [] and not h.shard.failed, h.shard.failed
    _push_w(h, 0, 1)
    reply = h.read()[0]
    assert reply["op"] == "error", reply
    if error:  # rank 1 failed on its own: blamed, as before
        assert reply["error"].startswith(
            'rank 1 (host h, no step since its hello) closed on "boom"; '
        )
        assert reply.get("failed_ranks") == [1] and "refused" not in reply, reply
    else:
        assert reply["error"].startswith(WAITERS + "holds rank 1 here: rank 0 "), reply
        assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply


@pytest.mark.timeout(30)
@pytest.mark.parametrize("error", ["", "boom"], ids=["abandoned", "abandoned-on-an-error"])
def test_a_rank_that_abandoned_the_step_too_hides_no_refusal(hand, error):
    """As above, and rank 2 abandoned step 1 as well: where its note carries no error (no rank
    failed), the step fails as the refusal still; it failed as the two ranks' leaving alone,
    blaming none, the refusal dropped. Where rank 2 abandoned the step on an error of its
    own, it is blamed and named beside rank 1."""
    h = hand(workers=3)
    _three_ranks_seeded(h)
    _bye(h, 1, run=11)
    assert _other_id_hello(h) == [] and not h.shard.failed, h.shard.failed
    h.send(
        {"op": "abandon", "rank": 2, "run": 17, "step": 1, **({"error": error} if error else {})}
    )
    assert h.read()[0]["op"] == "ok" and not h.shard.failed, h.shard.failed
    _push_w(h, 0, 1)
    reply = h.read()[0]
    assert reply["op"] == "error", reply
    if error:
        said = (
            "rank 1 (host h, no step since its hello) closed; rank 2 (host h, no step "
            "since its hello) abandoned"
        )
        said += ' step 1 on "boom"; rank 0 (step 1) waits for their pushes'
        assert reply["error"].startswith(said), reply
        assert reply.get("failed_ranks") == [2] and "refused" not in reply, reply
    else:
        assert reply["error"].startswith(WAITERS + "holds rank 1 here: rank 0 "), reply
        assert reply.get("refused") == "job" and "failed_ranks" not in reply, reply
