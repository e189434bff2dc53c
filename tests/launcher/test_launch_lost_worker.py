"""A parameter-server job under ``distconv-launch local`` whose worker is killed (SIGKILL, as
the OOM killer does). The shard, on the same host, sees the worker's process end
(:mod:`distconv.sync.ps.processes`) and fails the step or collective the survivor waits in,
naming the killed rank; the survivor exits 75 (another rank failed) and writes no checkpoint
of the step; the launcher ends at once and reports the killed worker, the survivor as its
victim. Before, the survivor waited for the shard's --timeout, or (sync mode) for its stop's
patience, or (async mode) for the launcher's whole --grace. A killed shard is seen by its
workers the same way. A plain SIGTERM still stops the job at a step the workers agree on, with a
checkpoint."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distconv.sync.ps.channel import STOP_PATIENCE
from tests.child_env import child_path
from tests.launcher.launch_cli import launcher_env
from tests.processes import job_env

REPO_ROOT = Path(__file__).resolve().parents[2]
# launcher_env: its HOME is each test's own (conftest.py)
ENV = launcher_env({**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"})
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_RESTART"):
    ENV.pop(_name, None)
#: far longer than the stop should take: a survivor that sits out the grace fails the test
GRACE = 60


def start(run: Path, env: dict[str, str], mode: str = "sync") -> subprocess.Popen:
    """Two workers, one shard, many short epochs (a checkpoint at each epoch's end), run with
    ``env`` (a :func:`tests.processes.job_env`'s, whose end takes what is left of the job)."""
    argv = [
        sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "1",
        "--mode", mode, "--run-dir", str(run), "--grace", str(GRACE), "--",
        "--data", "synthetic", "--epochs", "5000", "--batch-size", "32", "--no-progress",
    ]  # fmt: skip
    return subprocess.Popen(
        argv, env=env, cwd=run.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def until_trained(launcher: subprocess.Popen, run: Path, epochs: int = 3) -> None:
    """Until worker 0 has logged ``epochs`` epochs (its SIGTERM handler is in place)."""
    log, deadline = run / "logs" / "worker-0.log", time.monotonic() + 120
    while not (log.exists() and f"epoch {epochs}/" in log.read_text()):
        assert launcher.poll() is None, launcher.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "the job never trained"
        time.sleep(0.05)


def worker_pid(run: Path, rank: int) -> int:
    """The ``distconv train`` process of ``rank`` in the job of ``run``."""
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            str(run).encode() in cmdline
            and b"train" in cmdline
            and f"RANK={rank}".encode() in environ
        ):
            return int(entry.name)
    raise AssertionError(f"no worker {rank} of {run}")


def checkpoint_steps(run: Path) -> list[int]:
    manifests = (run / "train" / "checkpoints").glob("step-*.json")
    return sorted(int(re.search(r"\d+", m.stem).group()) for m in manifests)


def kill_mid_training(run: Path, pid_of, mode: str = "sync") -> tuple[int, str, int]:
    """Start the job, SIGKILL the process ``pid_of()`` names once it trained, and wait for the
    launcher; its status, its output and the pid killed. The shard looks every half second:
    the launcher must end within seconds (before: the stop's patience, or the grace)."""
    with job_env(ENV) as env:  # what is left of the job goes at the end, by its mark
        launcher = start(run, env, mode)
        try:
            until_trained(launcher, run)
            pid = pid_of()
            os.kill(pid, signal.SIGKILL)
            killed = time.monotonic()
            output, _ = launcher.communicate(timeout=GRACE + 60)
            took = time.monotonic() - killed
        finally:
            launcher.kill()
            launcher.wait()
    assert took < STOP_PATIENCE + 5, f"the launcher took {took:.1f} s (grace {GRACE} s)"
    return launcher.returncode, output, pid


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_killed_worker_ends_the_job_at_once_and_the_survivor_names_it(tmp_path, mode):
    run = tmp_path / "run"
    status, output, _ = kill_mid_training(run, lambda: worker_pid(run, 1), mode)
    assert status == 128 + signal.SIGKILL, output[-3000:]
    report = json.loads((run / "failure.json").read_text())
    assert (report["role"], report["rank"], report["signal"]) == ("worker", 1, "SIGKILL")
    assert [(v["rank"], v["exit_code"]) for v in report["victims"]] == [(0, 75)], report
    log = (run / "logs" / "worker-0.log").read_text()
    said = re.search(
        # rank 0 may be in a step, or in a gather (an epoch's allreduce, a checkpoint barrier)
        r"distconv train: error: rank 0, (step (\d+)|(allreduce|barrier):\d+): "
        r"pserver 127\.0\.0\.1:\d+: "
        r"rank 1 \(host [^,]+, last step \d+\): its process \(pid \d+, on this host\) ended "
        r"without a bye",
        log,
    )
    assert said, log[-3000:]
    assert "stopped by SIGTERM" not in log
    if said.group(2):  # nothing of the step given up was saved: an older checkpoint is newest
        assert checkpoint_steps(run), "no checkpoint at all"
        assert max(checkpoint_steps(run)) < int(said.group(2))


def shard_pid(run: Path) -> int:
    """The ``distconv pserver`` process of the job of ``run``."""
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(run).encode() in cmdline and b"pserver" in cmdline:
            return int(entry.name)
    raise AssertionError(f"no shard of {run}")


@pytest.mark.timeout(240)
def test_a_killed_shard_ends_the_job_at_once_and_the_workers_name_it(tmp_path):
    run = tmp_path / "run"
    _, _, pid = kill_mid_training(run, lambda: shard_pid(run))
    report = json.loads((run / "failure.json").read_text())
    assert (report["role"], report["rank"], report["signal"]) == ("server", 0, "SIGKILL")
    for rank in (0, 1):
        log = (run / "logs" / f"worker-{rank}.log").read_text()
        said = "pserver shard 0 (127.0.0.1:"
        gone = f") is gone: its process (pid {pid}, on this host) ended (stopped, killed"
        assert said in log and gone in log, log[-3000:]


@pytest.mark.timeout(240)
def test_a_sigterm_still_stops_both_workers_at_one_step_with_a_checkpoint(tmp_path):
    run = tmp_path / "run"
    with job_env(ENV) as env:  # what is left of the job goes at the end, by its mark
        launcher = start(run, env)
        try:
            until_trained(launcher, run)
            launcher.send_signal(signal.SIGTERM)
            output, _ = launcher.communicate(timeout=GRACE + 60)
        finally:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 143, output[-3000:]
    steps = set()
    for rank in (0, 1):
        log = (run / "logs" / f"worker-{rank}.log").read_text()
        stopped = re.search(r"stopped by SIGTERM after step (\d+)", log)
        assert stopped and "asked to stop" not in log, log[-3000:]
        steps.add(int(stopped.group(1)))
    (step,) = steps
    assert max(checkpoint_steps(run)) == step
    assert not (run / "failure.json").exists()
