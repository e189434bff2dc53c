"""A second setup of one worker (a second ``fit`` in the same process, so the same run id) with
another job's description: the shard refused that rank (its JobRefused), but the rank left
waiting in its own second setup's start-up gather heard a peer failure, ``rank 1 ... closed on
"JobRefused: ..."`` with ``failed_ranks`` (a PeerFailed, exit 75 under run_main), as if rank 1
had crashed. It now hears the refusal's own words, as a refusal of the job
(``"refused": "job"``, a JobRefused, exit 1), as the ranks waiting on a refused first hello do.
Real workers (threads of this process) on a real shard served on a thread, 127.0.0.1 port 0;
the order of events pinned by the hand-fed shard of ``test_ps_stuck`` where a step waits."""

from __future__ import annotations

import time

import pytest
from ps_helpers import insecure_worker, run_ranks, served, small_net
from test_ps_stuck import _bye, _hello_run, _meet, _push_w

from distconv.sync import JobRefused, SyncError
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard

#: the shard's --timeout: a waiting rank that hears nothing before it has waited it out
SHARD_TIMEOUT = 4.0


@pytest.mark.timeout(60)
def test_the_rank_waiting_on_a_refused_second_setup_hears_the_refusal():
    config = ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, timeout=SHARD_TIMEOUT)
    with served(Shard(config)) as shard:

        def rank_fn(rank: int) -> tuple[type, str, float]:
            sync = insecure_worker([shard.endpoint], rank, 2, timeout=30)
            start = time.monotonic()
            try:
                try:
                    sync.setup(small_net().parameters(), {"batch": 8})
                    start = time.monotonic()
                    sync.setup(small_net().parameters(), {"batch": 8 + rank})
                finally:  # as the error propagates: rank 1's bye carries its refusal
                    sync.close()
            except SyncError as exc:
                return type(exc), str(exc), time.monotonic() - start
            raise AssertionError(f"rank {rank} set up again a job whose ranks differ")

        said = run_ranks(rank_fn, 2, timeout=40)
    refusal = said[1][1].partition(f"pserver {shard.endpoint}: ")[2]
    assert " another job" in refusal or "run different jobs" in refusal, said[1]
    kind, waited, when = said[0]
    assert said[1][0] is JobRefused, said[1]
    assert kind is JobRefused, waited  # a PeerFailed before (exit 75 under run_main)
    assert waited.partition(f"pserver {shard.endpoint}: ")[2].startswith(f"{refusal}; "), waited
    assert when < SHARD_TIMEOUT, f"rank 0 heard after {when:.1f} s: {waited}"


@pytest.mark.timeout(30)
def test_a_step_left_by_a_refused_second_setup_is_refused_as_a_job(hand):
    """Sync: rank 0 pushed step 1; rank 1 sets up again (its own run) with another job and
    closes: rank 0's step is failed leading with the refusal, as a refusal of the job, no
    rank blamed."""
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    h.seed()
    _push_w(h, 0, 1)  # held for rank 1's push of step 1
    refused = _hello_run(h, 1, 11, {"batch": 8})
    assert refused.get("refused") == "job", refused
    _bye(h, 1, run=11, error=f"JobRefused: {refused['error']}")
    held = h.read()[0]
    assert held["error"].startswith(f"{refused['error']}; rank 1 "), held
    assert "rank 0 (step 1) waits for its push" in held["error"], held
    assert held.get("refused") == "job" and "failed_ranks" not in held, held
