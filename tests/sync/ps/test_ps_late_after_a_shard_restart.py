"""A shard killed mid-run and restarted slower than the workers' wait for its hello: the first
worker to restart gives up on that shard's hello and closes (on shard 0 too), the shard comes
up, and a second worker waits in its start-up job check for the first one's next restart.
Shard 0 answers that the rank is late, fails nothing, and the two train once it comes.

Real shards (``distconv pserver`` processes on 127.0.0.1), real workers (in threads here).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from ps_helpers import shard_argv
from test_late_shard import _set_up_and_train, _unused_endpoint, _worker

from distconv.sync.base import SyncError
from distconv.sync.ps.late_job_check import SHARD_SILENT_AT_HELLO

#: the shards' --timeout: one round of the job check
SHARD_TIMEOUT = 2.0
#: the workers' timeout: their wait in a round (GRACE times it) outlasts the shard's round
WORKER_TIMEOUT = 8.0


def _shard(shards, tmp_path, shard: int, bind: str = "127.0.0.1:0") -> str:
    """Shard ``shard`` of 2, sync, for 2 workers, binding ``bind``: its endpoint."""
    argv = shard_argv(["-m", "distconv"], shard=shard, shards=2, workers=2,
                      timeout=SHARD_TIMEOUT)  # fmt: skip
    argv[argv.index("127.0.0.1:0")] = bind
    return shards.launch(argv, tmp_path / f"shard{shard}.log")


@pytest.mark.timeout(120)
def test_a_rank_that_gave_up_on_a_restarting_shard_is_waited_for_and_the_job_trains(
    shards, tmp_path
):
    """Both ranks say hello while shard 1 is still down; rank 0's wait for it ends first, and
    it closes on that (shard 0 heard its hello, then its bye); shard 1 comes up, rank 1 goes on
    to its job check, and rank 0's restart comes a round of shard 0's --timeout later. Before,
    shard 0 failed at that timeout naming rank 0's error, and refused every worker after."""
    endpoints = [_shard(shards, tmp_path, 0), _unused_endpoint()]
    with ThreadPoolExecutor(2) as pool:
        waiting = pool.submit(_set_up_and_train, _worker(endpoints, 1, WORKER_TIMEOUT), 1)
        with pytest.raises(SyncError) as gave_up:  # shard 1 still down: rank 0 closes on it
            _set_up_and_train(_worker(endpoints, 0, SHARD_TIMEOUT / 2), 0)
        assert SHARD_SILENT_AT_HELLO in str(gave_up.value), gave_up.value  # shard 0 reads them
        _shard(shards, tmp_path, 1, endpoints[1])
        time.sleep(SHARD_TIMEOUT + 1.5)  # rank 0's restart comes a round late
        restarted = pool.submit(_set_up_and_train, _worker(endpoints, 0, WORKER_TIMEOUT), 0)
        for trained in (restarted, waiting):
            trained.result(timeout=60)  # set up and trained: no error
    logs = shards.log_text()
    assert "job failed" not in logs, logs
    late = f'(rank 0 closed on "SyncError: rank 0: {SHARD_SILENT_AT_HELLO}'
    assert late in logs and "the job is not failed" in logs, logs
