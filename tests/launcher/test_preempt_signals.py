"""A real ``distconv-launch local`` job (2 workers, 1 shard) whose one child gets a signal
the launcher did not send, as a preemption agent or an operator's ``kill`` of one pid does.

- The shard's SIGTERM alone: it drains until the workers' ``bye`` and exits 0 before them;
  the job finished, so the launch succeeds. A shard whose drain ended with workers still in
  fails the attempt once they fail without it, not after the grace.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.child_env import child_path
from tests.launcher.launch_cli import launcher_env
from tests.processes import job_env, job_processes

# launcher_env: its HOME is each test's own (conftest.py)
ENV = launcher_env({**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"})
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_RESTART"):
    ENV.pop(_name, None)
JOB = "preempted"


def launch(tmp_path: Path, env: Mapping[str, str], epochs: int, *options: str) -> subprocess.Popen:
    """``distconv-launch local`` of 2 workers and 1 shard on synthetic data (3 steps an
    epoch), its output in ``tmp_path``'s ``out.txt`` and ``err.txt``."""
    argv = [
        sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "1",
        "--job-id", JOB, *options, "--", "--data", "synthetic", "--epochs", str(epochs),
        "--batch-size", "64", "--no-progress",
    ]  # fmt: skip
    with open(tmp_path / "out.txt", "w") as out, open(tmp_path / "err.txt", "w") as err:
        return subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=out, stderr=err)


def log(tmp_path: Path, name: str) -> str:
    """The child ``name``'s log (``worker-1``), as far as it is written."""
    path = tmp_path / "runs" / JOB / "logs" / f"{name}.log"
    return path.read_text() if path.exists() else ""


def signal_child(
    tmp_path: Path, env: Mapping[str, str], launcher: subprocess.Popen, role: str, rank: int
) -> None:
    """SIGTERM to the ``role`` ``rank`` child alone, once worker 0 has trained epoch 1."""
    deadline = time.monotonic() + 60
    while "epoch 1/" not in log(tmp_path, "worker-0"):
        assert launcher.poll() is None, (tmp_path / "err.txt").read_text()[-3000:]
        assert time.monotonic() < deadline, "worker 0 never finished epoch 1"
        time.sleep(0.02)
    os.kill(child_pid(env, role, rank), signal.SIGTERM)


def child_pid(env: Mapping[str, str], role: str, rank: int) -> int:
    """The pid of the job's ``distconv`` process of ``role`` ``rank`` (by the environment the
    launcher gave it)."""
    for pid, command in job_processes(env).items():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        want = {f"DISTCONV_ROLE={role}".encode(), f"RANK={rank}".encode()}
        if want <= set(environ) and "distconv" in command:
            return pid
    raise AssertionError(f"no {role} {rank} among {job_processes(env)}")


def ended(launcher: subprocess.Popen, tmp_path: Path, seconds: float = 90) -> tuple[int, str]:
    """The launcher's exit status and its stderr."""
    status = launcher.wait(seconds)
    return status, (tmp_path / "err.txt").read_text()


@pytest.mark.timeout(150)
def test_a_shard_signalled_alone_drains_and_the_finished_job_succeeds(tmp_path):
    with job_env(ENV) as env:
        launcher = launch(tmp_path, env, 8)
        try:
            signal_child(tmp_path, env, launcher, "server", 0)
            status, err = ended(launcher, tmp_path)
        finally:
            launcher.kill()
            launcher.wait()
    assert status == 0, err[-3000:]
    assert "server 0 stopped on its own signal once the workers said bye" in err, err[-3000:]
    assert not (tmp_path / "runs" / JOB / "failure.json").exists(), err[-3000:]
    metrics = (tmp_path / "runs" / JOB / "train" / "metrics.jsonl").read_text().splitlines()
    assert len(metrics) == 8


@pytest.mark.timeout(150)
def test_a_shard_that_drained_out_under_training_workers_still_fails_the_attempt(tmp_path):
    """Its drain ends 10 s after the signal (the workers trained on 16 steps: they were not
    signalled); the workers fail without it, and the launcher reports the shard then, not
    after waiting out the grace for workers that will not finish."""
    with job_env(ENV) as env:
        launcher = launch(tmp_path, env, 100000, "--grace", "60")
        try:
            signal_child(tmp_path, env, launcher, "server", 0)
            signalled = time.monotonic()
            status, err = ended(launcher, tmp_path, 120)
            took = time.monotonic() - signalled
        finally:
            launcher.kill()
            launcher.wait()
    assert status == 1, err[-3000:]
    assert "server 0 exited (code 0) while workers were running" in err, err[-3000:]
    assert "trained on 16 steps" in log(tmp_path, "server-0")
    assert took < 40, f"reported {took:.0f} s after the shard's signal: it waited the grace"
