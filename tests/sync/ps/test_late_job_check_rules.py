"""Which ranks missing from the start-up job check at shard 0's ``--timeout`` are only late
(the ranks waiting are told so, and nothing fails) and which failed (the job fails, as before
the late answer): a shard fed by hand, its clock moved by the test.

A rank whose process on the shard's host ended is named so, before any late answer.
"""

from __future__ import annotations

import time

import pytest
from test_ps_processes import HOST, identity_of, sleeper  # noqa: F401 (a fixture)
from test_ps_stuck import _gather

from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.processes import LOOK_EVERY

TIMEOUT = 1.0


def _past_the_timeout(h) -> None:
    h.shard._check_timeouts(time.monotonic() + TIMEOUT + 1.0)


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
