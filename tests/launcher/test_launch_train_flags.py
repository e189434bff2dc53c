"""Train flags after ``--`` read as ``distconv train`` reads them, with the real launcher and a
real training: an abbreviated ``--out`` is the user's, not overridden by the launcher's own."""

from __future__ import annotations

import json
import os
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
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_KEYS", "DISTCONV_PSERVERS"):
    ENV.pop(_name, None)


def launch_local(tmp_path: Path, *train: str) -> subprocess.CompletedProcess:
    return run_job(
        [sys.executable, "-m", "launcher", "local", "--workers", "1", "--servers", "0",
         "--run-dir", str(tmp_path / "run"), "--", *train],
        env=ENV, timeout=100, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.timeout(120)
def test_an_abbreviated_out_is_where_the_run_goes(tmp_path):
    mine = tmp_path / "mine"
    done = launch_local(
        tmp_path, "--ou", str(mine), "--data", "synthetic", "--batch-size", "8", "--ep", "1"
    )
    assert done.returncode == 0, done.stderr
    lines = (mine / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines if '"epoch"' in line][-1] == 1
    assert not (tmp_path / "run" / "train").exists()  # the launcher's default, not taken


@pytest.mark.timeout(60)
def test_a_flag_distconv_train_does_not_take_is_one_line_before_anything_starts(tmp_path):
    done = launch_local(tmp_path, "--data", "synthetic", "--p", "1")
    assert done.returncode == 2  # a usage error, as a value train refuses
    assert done.stderr.strip().splitlines() == [
        "distconv-launch local: error: --p could be any of --pservers, --push-kb (the "
        "arguments after -- are distconv train's)"
    ]
    assert not (tmp_path / "run").exists()
