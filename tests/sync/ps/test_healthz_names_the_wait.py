"""A worker's ``/healthz`` that turns ``stalled`` while it waits for a peer says what it waits
for: ``stalled: worker 0, ...; waiting 1.2 s for pserver shard(s) 0 (...): setup's job check
(all_equal:1)``.

A healthy rank waiting for a straggler beats no step either: its ``/healthz`` read ``stalled:
worker 0, last step 198, 8.0 s ago (limit 5 s)``, as if it were the one stuck, and a liveness
probe restarted the healthy pod. The status stays 503 (the rank makes no progress, as the docs
say); the line names the wait, so that an operator looks at the peer.

The test waits for the job check's words, not for any wait: rank 0 waits for its hello's
reply first, and on a busy machine ``/healthz`` named that wait before the shard answered.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest

from distconv.rank_waits import Wait, current, waiting
from distconv.service import ServiceEndpoints
from tests.deploy.test_service import get
from tests.sync.ps.ps_helpers import Shards, insecure_worker, small_net


def _health_until(port: int, wanted: str, seconds: float = 20) -> tuple[int, str]:
    """``/healthz``'s answer once its body holds ``wanted`` (polled: a busy machine)."""
    deadline = time.monotonic() + seconds
    while True:
        status, body = get(port, "/healthz")
        if wanted in body or time.monotonic() > deadline:
            return status, body
        time.sleep(0.1)


@pytest.mark.timeout(90)
def test_a_worker_waiting_for_a_rank_names_its_wait_on_healthz(tmp_path: Path):
    """Rank 0 of two on a real shard waits in the start-up job check for rank 1, which comes
    late: its stalled ``/healthz`` names the shard and the check; once rank 1 has come and the
    wait is over, the line no longer does."""
    shards = Shards(tmp_path)
    service = ServiceEndpoints(role="worker", rank=0, stall_seconds=0.5)
    port = service.start()
    syncs, threads = [], []
    try:
        endpoints = shards.start(1, 2, extra=("--timeout", "30"))
        syncs = [insecure_worker(endpoints, rank, 2) for rank in (0, 1)]
        threads = [
            threading.Thread(target=s.setup, args=(small_net().parameters(),)) for s in syncs
        ]
        # the shard stopped, rank 0's hello waits past the stall limit, as on a busy machine
        os.kill(shards.procs[0].pid, signal.SIGSTOP)
        try:
            threads[0].start()
            status, body = _health_until(port, "waiting")
            assert status == 503 and body.endswith(": hello\n"), body  # not the job check yet
        finally:
            os.kill(shards.procs[0].pid, signal.SIGCONT)
        status, body = _health_until(port, "setup's job check")
        shard = re.escape(endpoints[0])
        want = (
            r"stalled: worker 0, last step none yet, \d+\.\d s ago \(limit 0\.5 s\); waiting "
            rf"\d+\.\d s for pserver shard\(s\) 0 \({shard}\): setup's job check \(all_equal:1\)\n"
        )
        assert status == 503 and re.fullmatch(want, body), body
        threads[1].start()  # rank 1 comes: the wait ends
        for thread in threads:
            thread.join(timeout=30)
        status, body = get(port, "/healthz")
        assert status == 503 and "waiting" not in body, body  # still no step: stalled, no wait
    finally:
        for thread in threads:  # rank 1 comes after a failure too: rank 0's wait ends
            if thread.ident is None:
                thread.start()
        for thread in threads:  # before the close: no socket closed under a rank's poll
            thread.join(timeout=30)
        for sync in syncs:
            sync.close()
        service.close()
        shards.stop()


def test_a_wait_within_another_gives_the_outer_back_and_none_after_both():
    outer, inner = Wait(lambda: "for a", 0.0), Wait(lambda: "for b", 0.0)
    with waiting(7, outer):
        with waiting(7, inner):
            assert current(7) is inner and current(8) is None  # by rank: ranks in one process
        assert current(7) is outer
    assert current(7) is None
    assert outer.text(now=2.5) == "waiting 2.5 s for a"
