"""A worker killed mid-training and restarted alone against shards that keep running (a
Kubernetes container restart, a rank restarted by hand): the shards tell the other ranks at
once, so the whole set restarts together, instead of at the shards' ``--timeout``. In sync mode
the others waited in their step; in async mode they trained on, and the restarted worker's
start-up gather met their next collective, at the epoch's end, where both waited (a rank alive
in another gather is not lost, ``--on-worker-loss continue`` too): either way the job failed at
the timeout, and only a restart of the shards too brought it back.

Real ``distconv train`` workers and real shards on 127.0.0.1. Each worker says another host
name (``HOSTNAME``), as pods do: a shard follows only the processes of workers on its own host,
and would otherwise see the killed one end and fail the job at once, which is no restart.
The shards' ``--timeout`` is long (30 s): what the test waits for comes far sooner.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ps_helpers import exits_within

from distconv.sync.peers import PEER_FAILED_STATUS
from tests.child_env import child_env
from tests.launcher.launch_cli import wait_while_running
from tests.processes import job_env, job_left

#: the shards' and workers' --timeout: waiting it out fails the test's deadlines
TIMEOUT = 30
#: seconds the told workers may take to end: far under TIMEOUT
TOLD_WITHIN = 8


def _worker(endpoints, rank, world, out: Path, env, log: Path, *extra) -> subprocess.Popen:
    """``distconv train`` as rank ``rank``, on a host of its own name (``pod-RANK``)."""
    argv = [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--epochs", "4",
            "--batch-size", "8", "--optimizer", "sgd", "--pservers", ",".join(endpoints),
            "--rank", str(rank), "--world-size", str(world), "--insecure",
            "--timeout", str(TIMEOUT), "--out", str(out), "--no-progress", *extra]  # fmt: skip
    with open(log, "w") as err:
        return subprocess.Popen(
            argv, env={**env, "HOSTNAME": f"pod-{rank}"}, stdout=subprocess.DEVNULL, stderr=err
        )


@pytest.mark.timeout(150)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_worker_restarted_alone_stops_the_others_at_once_and_is_taken_in(shards, tmp_path, mode):
    """Rank 2 of three, SIGKILLed after the first epoch and started again: ranks 0 and 1 end
    within seconds, exit 75, naming rank 2's restart (each of the two shards tells the ranks
    it holds, or refuses their next request); the restarted rank waits in the start-up check,
    and when the two come back (rank 0 from its checkpoint) the job finishes with it."""
    endpoints = shards.start(2, workers=3, mode=mode, extra=["--timeout", str(TIMEOUT)])
    logs = [tmp_path / f"rank{r}.log" for r in range(3)]
    with job_env(child_env(OMP_NUM_THREADS="1")) as env:
        outs = [tmp_path / f"out{r}" for r in range(3)]
        procs = [_worker(endpoints, r, 3, outs[r], env, logs[r]) for r in range(3)]
        wait_while_running(lambda: "epoch 1/" in logs[0].read_text(), procs[0], "epoch 1", 60)
        procs[2].send_signal(signal.SIGKILL)
        procs[2].wait()
        again = tmp_path / "rank2-again.log"
        procs[2] = _worker(endpoints, 2, 3, tmp_path / "out2-again", env, again)
        killed = time.monotonic()
        for r in (0, 1):
            status = exits_within(procs[r], TOLD_WITHIN + killed - time.monotonic())
            text = logs[r].read_text()
            assert status == PEER_FAILED_STATUS, f"rank {r}: {status}: {text[-3000:]}"
            assert "rank 2 started again" in text, text[-3000:]
        assert time.monotonic() - killed < TOLD_WITHIN  # not the shards' timeout
        assert procs[2].poll() is None, again.read_text()  # waits for the others' restart
        # the others come back, rank 0 from its checkpoint: the restarted rank 2 is taken in
        logs = [tmp_path / f"rank{r}-again.log" for r in (0, 1)] + [again]
        for r in (0, 1):
            procs[r] = _worker(endpoints, r, 3, outs[r], env, logs[r], "--resume", "auto")
        statuses = [exits_within(p, 90) for p in procs]
        assert statuses == [0, 0, 0], [log.read_text()[-2000:] for log in logs]
        # the first epoch's checkpoint (384 examples, 24 a step): the kill cut the second short
        assert "at step 16, after epoch 1," in logs[0].read_text()
        assert not job_left(env, 5)
