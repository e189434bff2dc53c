"""Issue 11's acceptance: both launch modes train the default model to >= 98 % on the digits.

These need the transports wired into ``distconv train --sync`` (the parameter-server and MPI
issues); until then they skip and say why.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path
from tests.launcher.launch_cli import launcher_env
from tests.processes import run_job

REPO_ROOT = Path(__file__).resolve().parents[2]
# launcher_env: its HOME is each test's own (conftest.py)
ENV = launcher_env({**os.environ, "PYTHONPATH": child_path()})
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
    ENV.pop(_name, None)
ACCURACY = re.compile(r"^\[worker 0\] .*test accuracy (\d\.\d+)", re.MULTILINE)


def _train_help() -> str:
    done = subprocess.run(
        [sys.executable, "-m", "distconv", "train", "--help"],
        env=ENV, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return done.stdout


def _missing(module: str) -> str | None:
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        return f"{module} is not merged yet"
    if "--sync" not in _train_help():
        return "distconv train has no --sync yet"
    return None


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_local_two_workers_two_servers_reach_98_percent(tmp_path):
    reason = _missing("distconv.sync.ps.client")
    if reason:
        pytest.skip(reason)
    done = run_job(
        [sys.executable, "-m", "launcher", "local", "--workers", "2", "--servers", "2",
         "--run-dir", str(tmp_path / "run"), "--grace", "20", "--", "--no-progress"],
        env=ENV, timeout=880, cwd=tmp_path,  # run_job: a hang takes the whole job
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (accuracy,) = ACCURACY.findall(done.stdout)
    assert float(accuracy) >= 0.98


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.timeout(900)
def test_mpi_two_ranks_reach_98_percent(tmp_path):
    reason = _missing("distconv.sync.mpi")
    if reason or shutil.which("mpiexec") is None:
        pytest.skip(reason or "mpiexec is not on PATH")
    done = run_job(
        [sys.executable, "-m", "launcher", "mpi", "-np", "2", "-H", "localhost:2",
         "--run-dir", str(tmp_path / "run"), "--", "--no-progress", "--out", str(tmp_path / "o")],
        env=ENV, timeout=880, cwd=tmp_path,  # run_job: a hang takes the whole job
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    accuracy = re.findall(r"test accuracy (\d\.\d+)", done.stdout)
    assert accuracy and float(accuracy[0]) >= 0.98
