"""A run that ``distconv train`` began (``runs/<name>``, no ``train/``) moved to
``distconv-launch``: ``-- --resume`` in the launch's new run directory was refused saying
``runs/`` held no run, and told the user to pass a launch's ``--job-id`` there was none of:
the refusal now gives the ``--out`` that goes on with it, which works. Real launches of real
``distconv train`` workers on real folders."""

from __future__ import annotations

import sys

import pytest

from tests.child_env import child_env
from tests.launcher.launch_cli import launch
from tests.processes import run_job

pytestmark = pytest.mark.timeout(120)

SMALL = ("--data", "synthetic", "--batch-size", "32", "--no-progress", "--epochs", "1")
#: the launch of one worker without shards: local sync, the cheapest real job
ONE_WORKER = ("local", "--workers", "1", "--servers", "0")


def _trained_by_distconv_train(tmp_path) -> None:
    """``runs/synthetic-adam-seed0``, one epoch (step 12), as ``distconv train`` writes it."""
    argv = [sys.executable, "-m", "distconv", "train", *SMALL]
    done = run_job(argv, env=child_env(), timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_resume_refused_in_a_new_run_dir_gives_the_out_that_goes_on_and_that_works(tmp_path):
    _trained_by_distconv_train(tmp_path)
    refused = launch(*ONE_WORKER, "--", *SMALL, "--epochs", "2", "--resume", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert lines[0].endswith(
        f"pass the --job-id (or --run-dir) of the launch that began the run; '{tmp_path}/runs' "
        "holds no run directory with checkpoints in its train/; for a run distconv train "
        "began, pass its --out after --: --out runs/synthetic-adam-seed0 --resume"
    ), lines[0]
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["synthetic-adam-seed0"]

    way_on = ("--out", "runs/synthetic-adam-seed0", "--resume")
    resumed = launch(*ONE_WORKER, "--", *SMALL, "--epochs", "2", *way_on, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    said = resumed.stdout + resumed.stderr
    assert "resumed from runs/synthetic-adam-seed0/checkpoints/step-00000012" in said, said
    assert "epoch 2/2" in said, said
