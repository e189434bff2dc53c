"""Which ranks missing from the start-up job check at shard 0's ``--timeout`` are only late
(the ranks waiting are told so, and nothing fails) and which failed (the job fails, as before
the late answer): a shard fed by hand, its clock moved by the test.

A rank whose worker closed on an error of its own in this start of the job (after its hello,
the ranks not met since) failed: waiting ten rounds more for it only delayed the stop
(``test_ps_closed_mid_step.py``, a timeout names a rank that closed). One whose worker closed
on another rank's failure, or in the run before (the ranks met since its hello: a shard
killed mid-run), is late: its restart is what the ranks wait for. A rank whose process on the
shard's host ended is named so, before any late answer.
"""

from __future__ import annotations

import time

import pytest
from test_ps_processes import HOST, identity_of, sleeper  # noqa: F401 (a fixture)
from test_ps_stuck import _bye, _gather, _hello, _meet

from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.late_job_check import NOT_FAILED, SHARD_SILENT_AT_HELLO
from distconv.sync.ps.processes import LOOK_EVERY

TIMEOUT = 1.0


def _past_the_timeout(h) -> None:
    h.shard._check_timeouts(time.monotonic() + TIMEOUT + 1.0)


@pytest.mark.timeout(30)
def test_a_rank_that_closed_on_another_ranks_failure_is_late(hand):
    """Rank 1 closed naming rank 2's failure (its bye's ``failed_ranks``): a victim, whose
    restart may come; rank 0 is told the ranks are late, and nothing fails."""
    h = hand(workers=3, timeout=TIMEOUT)
    for rank in (1, 0, 2):
        _hello(h, rank)
    _bye(h, 1, error="PeerFailed: rank 2 failed", failed_ranks=[2])
    _gather(h, 0, "all_equal:1")
    _gather(h, 2, "all_equal:1")
    _past_the_timeout(h)
    told = [h.read()[0] for _ in range(2)]
    assert all(t["late"] == [1] and t["error"].endswith(NOT_FAILED) for t in told), told
    assert not h.shard.failed


@pytest.mark.timeout(30)
def test_a_rank_that_closed_on_an_error_in_the_run_before_is_late(hand):
    """The ranks met, then rank 1 closed on an error (a shard killed mid-run), and rank 0's
    restarted worker waits in its job check: rank 1's restart is what is late, so rank 0 is
    told so, and nothing fails."""
    h = hand(workers=2, timeout=TIMEOUT)
    for rank in (0, 1):
        _hello(h, rank)
    _meet(h)
    _bye(h, 1, error="SyncError: shard 1 gave no answer")
    _bye(h, 0, error="SyncError: shard 1 gave no answer")
    head = {"op": "hello", "rank": 0, "host": "h", **hello_fields({}), "run": 77}
    assert h.ask(head)[0]["op"] == "ok"  # rank 0's restart
    _gather(h, 0, "all_equal:1")
    _past_the_timeout(h)
    told = h.read()[0]
    assert told["late"] == [1] and told["error"].endswith(f"; {NOT_FAILED}"), told
    assert not h.shard.failed


@pytest.mark.timeout(30)
@pytest.mark.parametrize("first", [0, 1], ids=["its-hello-first", "the-waiting-rank-first"])
def test_a_rank_that_closed_as_another_shard_never_answered_its_hello_is_late(hand, first):
    """Both ranks' hellos here were answered, shard 1's to rank 0 never (down, restarting):
    rank 0 closed on that, in this start; its restart, once shard 1 is up, is what rank 1
    waits for, so rank 1 is told the rank is late, and nothing fails. A shard restarted slower
    than the workers' wait failed shard 0 too, and every worker was refused until its restart:
    at the timeout where rank 0's hello came first (an error of its own in this start), at
    once where rank 1's did (the stuck check: a rank of this run closed)."""
    h = hand(workers=2, timeout=TIMEOUT)
    for rank in (first, 1 - first):
        _hello(h, rank)
    _bye(h, 0, error=f"SyncError: rank 0: {SHARD_SILENT_AT_HELLO}1 (127.0.0.1:9) within 4.5 s")
    _gather(h, 1, "all_equal:1")
    assert not h.shard.failed
    _past_the_timeout(h)
    told = h.read()[0]
    assert told["late"] == [0] and told["error"].endswith(f"; {NOT_FAILED}"), told
    assert not h.shard.failed


@pytest.mark.timeout(30)
def test_a_rank_whose_process_ended_is_named_so_not_late(hand, sleeper):  # noqa: F811
    """Rank 1's process on the shard's host ended while rank 0 waits in the job check, found
    by a look before the timeout and named at the look that comes with it: the job fails
    naming that end, before any answer that the rank is late."""
    h = hand(workers=2, timeout=TIMEOUT)
    workers = [sleeper(), sleeper()]
    for rank, w in enumerate(workers):
        head = {"op": "hello", "rank": rank, "host": HOST, **hello_fields({}), "run": rank}
        assert h.ask({**head, "process": identity_of(w.pid)})[0]["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    workers[1].kill()
    workers[1].wait()
    since = h.shard.waiting["gather:all_equal:1"].since
    h.shard._check_timeouts(since + TIMEOUT / 2)  # the look that finds it ended
    h.shard._check_timeouts(since + TIMEOUT + 2 * LOOK_EVERY)  # the look that names it
    told = h.read()[0]
    assert "its process" in told["error"] and "ended without a bye" in told["error"], told
    assert "late" not in told and h.shard.failed, told
