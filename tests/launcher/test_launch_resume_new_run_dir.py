"""``-- --resume`` without the ``--job-id`` or ``--run-dir`` of the launch that began the run:
each launch picks a new job id, so a new, empty run directory, where the workers failed with
``... does not exist (in a script: resume=True)`` and left a ``runs/launch-*`` holding a
``failure.json``. Refused before anything starts, naming the runs there are. Real
``distconv-launch`` runs on real folders."""

from __future__ import annotations

import os

import pytest

from launcher.shown import shown
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip


def _runs(tmp_path):
    """``runs/`` with the run directories of two launches whose ``train/`` holds checkpoints
    (``K2`` the newer) and one that holds no run (a launch refused before its workers wrote
    anything)."""
    runs = tmp_path / "runs"
    for name, when in (("J1", 1_000_000), ("K2", 2_000_000)):
        checkpoints = runs / name / "train" / "checkpoints"
        checkpoints.mkdir(parents=True)
        (checkpoints / "step-00000012.json").write_text("{}")  # a checkpoint's manifest
        os.utime(checkpoints, (when, when))
    (runs / "empty").mkdir()
    return runs


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "command",
    [("local", "--workers", "1", "--servers", "0"), ("mpi", "-np", "2", "--dry-run")],
)
@pytest.mark.parametrize("resume", [("--resume",), ("train", "--res", "--epochs", "2")])
def test_a_resume_in_a_new_run_directory_is_refused_naming_the_runs(tmp_path, command, resume):
    runs = _runs(tmp_path)
    done = launch(*command, "--", *resume, cwd=tmp_path)
    assert done.returncode == 2, done.stderr  # a usage error, as the launcher's others
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"distconv-launch {command[0]}: error: ")
    assert "pass the --job-id (or --run-dir) of the launch that began the run" in lines[0]
    assert f"{shown(runs)} holds 'K2', 'J1' (newest first)" in lines[0], lines[0]
    assert sorted(p.name for p in runs.iterdir()) == ["J1", "K2", "empty"]  # nothing made
    assert not (tmp_path / "runs" / "K2" / "logs").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "chosen", [("--job-id", "K2", "--", "--resume"), ("--", "--resume", "auto")]
)
def test_a_resume_with_its_job_id_or_auto_is_not_refused(tmp_path, chosen):
    mpiexec_or_skip()
    _runs(tmp_path)
    done = launch("mpi", "-np", "2", "--dry-run", *chosen, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "--resume" in done.stdout
