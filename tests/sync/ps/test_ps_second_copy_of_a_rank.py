"""A second process that says hello as a rank of a running job (the same worker command started
twice by mistake, or another experiment's worker given this job's shards) is refused, naming
the live worker that holds the rank, and the job trains on. Taken as a restart of that rank, it
ended the job, telling every worker that the rank had been "killed or crashed".

Real ``distconv train`` workers and a real shard on 127.0.0.1. On the shard's own host the shard
sees the rank's worker's process running; on another host (``HOSTNAME``, as pods say) it holds
the newcomer's hello until that worker speaks again (its next push). A worker killed and
restarted is still a restart: ``test_ps_worker_restarted_alone.py``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from ps_helpers import exits_within

from tests.child_env import child_env
from tests.launcher.launch_cli import wait_while_running
from tests.processes import job_env, job_left

#: the shard's and workers' --timeout: long, as nothing here waits it out
TIMEOUT = 30
#: what the live job trains: long enough for a newcomer to start and say hello meanwhile
EPOCHS = 150
#: the refusal a newcomer for rank 1 gets
HELD = "rank 1 is held by a live worker (host "


def _train(endpoints, rank: int, out: Path, env, log: Path, *extra: str, host: str | None = None):
    """``distconv train`` as ``rank`` of two, its stderr to ``log``; ``host``: the host name it
    says (None: this host's)."""
    argv = [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--epochs",
            str(EPOCHS), "--batch-size", "8", "--optimizer", "sgd", "--pservers",
            ",".join(endpoints), "--rank", str(rank), "--world-size", "2", "--insecure",
            "--timeout", str(TIMEOUT), "--out", str(out), "--no-progress", *extra]  # fmt: skip
    env = {**env, "HOSTNAME": host} if host else env
    with open(log, "w") as err:
        return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=err)


@pytest.mark.timeout(150)
# each host's way of telling a live worker (its pid here; its connections, then its silence
# elsewhere) and each newcomer once: the async test below takes the same command elsewhere
@pytest.mark.parametrize(
    "host, newcomer",
    [(None, ()), ("pod", ("--lr", "0.05"))],
    ids=["same-command-this-host", "another-job-other-hosts"],
)
def test_a_second_process_for_a_live_rank_is_refused_and_the_job_trains_on(
    shards, tmp_path, host, newcomer
):
    """A job of two trains; a third process says hello as rank 1 (its command again, or one
    with another --lr). It exits 1 naming the live worker of rank 1, and both workers of the
    job finish their epochs (exit 0)."""
    _assert_refused_beside_live_job(shards, tmp_path, host, newcomer, "sync")


@pytest.mark.timeout(150)
def test_async_a_second_copy_on_another_host_is_refused_and_the_job_trains_on(shards, tmp_path):
    """As above in async mode, where the live worker is heard by its pushes and its beats."""
    _assert_refused_beside_live_job(shards, tmp_path, "pod", (), "async")


def _assert_refused_beside_live_job(shards, tmp_path, host, newcomer, mode: str) -> None:
    """Start a job of two on one shard in ``mode``, its workers on ``host`` (None: this one);
    once it trains, a newcomer for rank 1 with ``newcomer`` flags is refused and the job ends
    well."""
    endpoints = shards.start(1, workers=2, mode=mode, extra=["--timeout", str(TIMEOUT)])
    logs = [tmp_path / f"rank{r}.log" for r in range(2)]
    with job_env(child_env(OMP_NUM_THREADS="1")) as env:
        procs = [
            _train(endpoints, r, tmp_path / f"out{r}", env, logs[r], host=host and f"{host}-{r}")
            for r in range(2)
        ]
        wait_while_running(lambda: "epoch 1/" in logs[0].read_text(), procs[0], "epoch 1", 60)
        log = tmp_path / "newcomer.log"
        copy = _train(
            endpoints, 1, tmp_path / "copy", env, log, *newcomer, host=host and f"{host}-1"
        )
        assert exits_within(copy, 60) == 1, log.read_text()[-3000:]
        said = log.read_text()
        assert HELD in said and "is this a second copy of its command? stop one" in said, said
        if host is None:  # the shard follows the live worker's process: its pid is the way out
            assert f"the live one is pid {procs[1].pid} on this host" in said, said
        assert all(p.poll() is None for p in procs), "the job ended before the newcomer's hello"
        statuses = [exits_within(p, 90) for p in procs]
        assert statuses == [0, 0], [log.read_text()[-3000:] for log in logs]
        assert f"epoch {EPOCHS}/{EPOCHS}" in logs[0].read_text()
        assert not job_left(env, 5)
    assert "started again" not in shards.log_text()


@pytest.mark.timeout(150)
def test_a_newcomer_for_a_rank_whose_worker_is_stopped_is_told_to_resume_or_end_it(
    shards, tmp_path
):
    """Rank 1's worker stopped (Ctrl-Z, a debugger) is silent, so its command started again
    looks like its restart: the shard sees the process stopped, not ended. The newcomer is
    refused naming that pid and the two ways out; once resumed, the job trains on."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    logs = [tmp_path / f"rank{r}.log" for r in range(2)]
    with job_env(child_env(OMP_NUM_THREADS="1")) as env:
        procs = [_train(endpoints, r, tmp_path / f"out{r}", env, logs[r]) for r in range(2)]
        wait_while_running(lambda: "epoch 1/" in logs[0].read_text(), procs[0], "epoch 1", 60)
        procs[1].send_signal(signal.SIGSTOP)
        try:
            log = tmp_path / "newcomer.log"
            copy = _train(endpoints, 1, tmp_path / "copy", env, log)
            assert exits_within(copy, 60) == 1, log.read_text()[-3000:]
        finally:
            procs[1].send_signal(signal.SIGCONT)
        said, pid = log.read_text(), procs[1].pid
        assert "rank 1 is held by a stopped worker (host " in said, said
        assert f"(pid {pid}, on this host) is stopped" in said, said
        assert f"kill -CONT {pid}" in said and f"kill -9 {pid}" in said, said
        assert [exits_within(p, 90) for p in procs] == [0, 0], [x.read_text()[-3000:] for x in logs]
        assert not job_left(env, 5)
    assert "started again" not in shards.log_text()
