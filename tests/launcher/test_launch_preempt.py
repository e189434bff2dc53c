"""Real ``distconv train`` under ``distconv-launch local``: SIGTERM checkpoints, exits 143, and
a second launch resumes from that checkpoint with ``--resume auto``; with a parameter-server
shard too, which keeps serving until the worker has checkpointed through it."""

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

from tests.child_env import child_path
from tests.launcher.launch_cli import launcher_env
from tests.probes import WORKER_PROBES, bound_port, trained_samples
from tests.processes import job_env, job_left, run_job

REPO_ROOT = Path(__file__).resolve().parents[2]
# launcher_env: its HOME is each test's own (conftest.py)
ENV = launcher_env({**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"})
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_RESTART"):
    ENV.pop(_name, None)
#: many short epochs: the run is still training when the test's SIGTERM lands
EPOCHS = "12"


def launch_argv(run: Path, servers: int, *train: str) -> list[str]:
    return [
        sys.executable, "-m", "launcher", "local", "--workers", "1", "--servers", str(servers),
        "--run-dir", str(run), "--grace", "60", "--",
        "--data", "synthetic", "--epochs", EPOCHS, "--batch-size", "32", "--no-progress", *train,
    ]  # fmt: skip


def worker_port(run: Path, launcher: subprocess.Popen) -> int:
    """The health port the launched worker bound (``--health-port 0``: the kernel's choice),
    as its log in the run directory names it."""
    return bound_port(run / "logs" / "worker-0.log", WORKER_PROBES, launcher, limit=120)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("servers", [0, 1])
def test_sigterm_checkpoints_and_a_second_launch_resumes(tmp_path, servers):
    run = tmp_path / "run"
    with job_env(ENV) as env:  # a launcher hung on the SIGTERM goes with its shard and worker
        launcher = subprocess.Popen(
            launch_argv(run, servers, "--health-port", "0"),
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            port = worker_port(run, launcher)
            deadline = time.monotonic() + 120
            while trained_samples(port) <= 0:  # a step is done: the SIGTERM handler is in place
                assert launcher.poll() is None, launcher.communicate()
                assert time.monotonic() < deadline, "the worker never trained a step"
                time.sleep(0.02)
            launcher.send_signal(signal.SIGTERM)
            stdout, stderr = launcher.communicate(timeout=90)
        finally:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 143, stderr
    log = (run / "logs" / "worker-0.log").read_text()
    stopped = re.search(r"stopped by SIGTERM after step (\d+)", log)
    assert stopped, log[-2000:]
    checkpoint_step = int(stopped.group(1))
    assert any((run / "train").rglob("*")), "no checkpoint in the run directory"

    again = run_job(
        launch_argv(run, servers, "--resume", "auto"), env=ENV, timeout=180, cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr[-3000:]
    resumed = re.search(r"resumed from .* at step (\d+), ", again.stdout + again.stderr)
    assert resumed, (again.stdout + again.stderr)[-3000:]
    assert int(resumed.group(1)) == checkpoint_step
    assert f"after epoch {EPOCHS}" in again.stdout
    metrics = (run / "train" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in metrics] == list(range(1, int(EPOCHS) + 1))


def _mid_epoch_checkpoint(run: Path) -> int | None:
    """The step of a checkpoint written inside an epoch (a SIGTERM's; epoch ends are not)."""
    from distconv.checkpoint import load_checkpoint

    for manifest in sorted((run / "train" / "checkpoints").glob("step-*.json")):
        ckpt = load_checkpoint(manifest.with_suffix("") / "chief.safetensors")
        if int(ckpt.extra.get("step_in_epoch", 0)):
            return ckpt.step
    return None


@pytest.mark.timeout(240)
def test_a_killed_launcher_leaves_a_parameter_server_worker_its_checkpoint(tmp_path):
    """kill -9 of the launcher: the kernel sends every child SIGTERM at once (parent-death
    signal); the shard drains, so the worker checkpoints through it before it goes."""
    run = tmp_path / "run"
    with job_env(ENV) as env:  # what is left of the job goes at the end, by its mark
        launcher = subprocess.Popen(
            launch_argv(run, 1, "--health-port", "0", "--epochs", "5000"),
            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            port = worker_port(run, launcher)
            deadline = time.monotonic() + 120
            while trained_samples(port) <= 0:
                assert launcher.poll() is None, "the job ended before it trained"
                assert time.monotonic() < deadline, "the worker never trained a step"
                time.sleep(0.02)
            launcher.kill()
            launcher.wait()
            # the job by its mark: a grandchild that does not name the run folder counts too
            left = job_left(env, 60)
            assert left == {}, f"the shard or the worker outlived the launcher by 60 s: {left}"
            assert _mid_epoch_checkpoint(run) is not None, "no checkpoint at the SIGTERM"
        finally:
            launcher.kill()
            launcher.wait()
