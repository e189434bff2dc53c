"""A shard that starts late, in async mode: the shards that answered a worker's hello count its
silence from that hello, so the worker beats each of them as soon as it answered, while it
waits for the others (a shard pod still pending: an image pull, a volume being provisioned).
The job then waits for the late shard; one that never answers is named by the worker.

Real shards (``distconv pserver`` processes on 127.0.0.1), real workers (in threads here).
"""

from __future__ import annotations

import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from ps_helpers import batches, shard_argv, small_net, train_steps

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.ps.channel import GRACE
from distconv.sync.ps.client import PServerSync

#: the shards' --timeout: how long a rank may be silent on a shard that answered its hello
SHARD_TIMEOUT = 3.0
#: the late shard starts this long after the workers said hello: past the shards' timeout
LATE = SHARD_TIMEOUT + 1.5
#: the workers' timeout: their wait for the late shard's hello (GRACE times it) must outlast
#: LATE and the shard's start-up on a loaded machine, which the shards' own timeout would not
WORKER_TIMEOUT = 8.0


def _unused_endpoint() -> str:
    """A HOST:PORT on 127.0.0.1 that nobody listens at once this returns: the late shard's."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def _shard_cmd(shard: int, bind: str = "127.0.0.1:0") -> list[str]:
    """Shard ``shard`` of 3, async, for 2 workers, binding ``bind``."""
    argv = shard_argv(["-m", "distconv"], shard=shard, shards=3, workers=2, mode="async",
                      timeout=SHARD_TIMEOUT)  # fmt: skip
    argv[argv.index("127.0.0.1:0")] = bind
    return argv


def _start_two_of_three(shards, tmp_path) -> list[str]:
    """Shards 0 and 1 started, shard 2's endpoint chosen but not started: the three endpoints."""
    early = [shards.launch(_shard_cmd(s), tmp_path / f"shard{s}.log") for s in (0, 1)]
    return [*early, _unused_endpoint()]


def _worker(endpoints: list[str], rank: int, timeout: float) -> PServerSync:
    return PServerSync(create_optimizer("sgd", lr=0.05), rank=rank, world_size=2,
                       pservers=endpoints, insecure=True, timeout=timeout,
                       block_bytes=64)  # fmt: skip


def _set_up_and_train(sync: PServerSync, rank: int, idle: float = 0.0) -> int:
    """Set up, send nothing for ``idle`` seconds (but beats), and train 5 steps; the pushes
    the shards applied."""
    net = small_net(seed=rank)
    try:
        sync.setup(net.parameters(), {"batch": 8})
        time.sleep(idle)
        train_steps(net, sync, batches(5, 8, seed=rank), rank, 2)
        return sync.push_messages_applied
    finally:
        sync.close()


@pytest.mark.timeout(120)
def test_a_shard_started_after_the_timeout_is_waited_for_and_the_job_trains(shards, tmp_path):
    """Shard 2 starts more than the shards' --timeout after both workers said hello: shards 0
    and 1 hear their beats meanwhile, so nobody is declared silent, and both workers train,
    after a pause longer than the timeout that every shard, shard 2 too, hears beats through.
    Before, shards 0 and 1 failed the job at their timeout, blaming rank 1's silence, and the
    workers were refused at their start-up check."""
    endpoints = _start_two_of_three(shards, tmp_path)
    syncs = [_worker(endpoints, rank, WORKER_TIMEOUT) for rank in (0, 1)]
    with ThreadPoolExecutor(2) as pool:
        trained = [
            pool.submit(_set_up_and_train, syncs[r], r, idle=SHARD_TIMEOUT + 1) for r in (0, 1)
        ]
        time.sleep(LATE)  # the hellos went out as the threads started
        shards.launch(_shard_cmd(2, endpoints[2]), tmp_path / "shard2.log")
        applied = [f.result(timeout=60) for f in trained]
    assert all(n > 0 for n in applied), applied
    logs = shards.log_text()
    assert "silent" not in logs and "job failed" not in logs, logs


@pytest.mark.timeout(60)
def test_a_shard_that_never_starts_is_named_by_the_workers_not_their_silence(shards, tmp_path):
    """Shard 2 never starts, and shards and workers have one --timeout: each worker gives up
    on shard 2's hello naming it, and no shard blames a worker's silence meanwhile. Before,
    shards 0 and 1 failed the job at their timeout saying "rank 1 ... silent for 3 s"."""
    endpoints = _start_two_of_three(shards, tmp_path)
    syncs = [_worker(endpoints, rank, SHARD_TIMEOUT) for rank in (0, 1)]
    with ThreadPoolExecutor(2) as pool:
        outcomes = [pool.submit(_set_up_and_train, syncs[r], r) for r in (0, 1)]
        errors = [f.exception(timeout=30) for f in outcomes]
    for rank, error in enumerate(errors):
        assert isinstance(error, SyncError), error
        named = re.escape(
            f"rank {rank}: no answer to hello from pserver shard(s) 2 ({endpoints[2]}) "
            f"within {SHARD_TIMEOUT * GRACE:g} s"
        )
        assert re.match(named, str(error)), error
        assert not any(sync._heartbeat for sync in syncs)  # a failed setup beats no shard
    assert "silent" not in shards.log_text(), shards.log_text()


def _run_workers(endpoints: list[str], timeout: float) -> list[BaseException | None]:
    """Two fresh workers set up and train (:func:`_set_up_and_train`); each one's error."""
    syncs = [_worker(endpoints, rank, timeout) for rank in (0, 1)]
    with ThreadPoolExecutor(2) as pool:
        outcomes = [pool.submit(_set_up_and_train, syncs[r], r) for r in (0, 1)]
        return [f.exception(timeout=60) for f in outcomes]


@pytest.mark.timeout(120)
def test_once_the_missing_shard_starts_the_restarted_workers_train(shards, tmp_path):
    """The workers gave up on shard 2 and left on that error; shards 0 and 1 did not fail, so
    once shard 2 starts, the workers' restart (as a launcher or the kubelet restarts them)
    trains on the same shards, which say the job before ended on errors, not cleanly."""
    endpoints = _start_two_of_three(shards, tmp_path)
    assert all(isinstance(e, SyncError) for e in _run_workers(endpoints, SHARD_TIMEOUT))
    shards.launch(_shard_cmd(2, endpoints[2]), tmp_path / "shard2.log")
    assert _run_workers(endpoints, SHARD_TIMEOUT) == [None, None]
    logs = shards.log_text()
    for shard in (0, 1):
        assert (
            f"shard {shard}: the job before ended on errors (its workers said bye, rank 0 "
            'closed on "SyncError: rank 0: no answer to hello from pserver shard(s) 2' in logs
        ), logs
    assert "job failed" not in logs, logs
