"""A run that ``distconv train`` began (``runs/<name>``, no ``train/``) moved to
``distconv-launch``: ``-- --resume`` in the launch's new run directory was refused saying
``runs/`` held no run, and told the user to pass a launch's ``--job-id`` there was none of;
``-- --resume auto`` trained a fresh run without a word. The refusal now gives the ``--out``
that goes on with it, which works, and ``--resume auto`` is warned of. Real launches of real
``distconv train`` workers on real folders."""

from __future__ import annotations

import json
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


def test_resume_auto_in_a_new_run_dir_beside_runs_warns_that_it_trains_afresh(tmp_path):
    """Beside a run of each layout (a launch's ``J1`` whose ``train/`` holds checkpoints): the
    launcher's warning names both, each with its way on, and the chief says its fresh start."""
    _trained_by_distconv_train(tmp_path)
    first = launch(*ONE_WORKER, "--job-id", "J1", "--", *SMALL, cwd=tmp_path)
    assert first.returncode == 0, first.stderr

    fresh = launch(*ONE_WORKER, "--", *SMALL, "--resume", "auto", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    said = fresh.stdout + fresh.stderr
    warned = [line for line in said.splitlines() if "--resume auto after --" in line]
    assert warned == [
        "distconv-launch: --resume auto after -- goes on only with a run in this launch's new "
        "run directory, which holds none: this job trains a fresh run. To go on with a run "
        "there is, pass the --job-id (or --run-dir) of the launch that began it; "
        f"'{tmp_path}/runs' holds 'J1' (newest first); for a run distconv train began, pass "
        "its --out after --: --out runs/synthetic-adam-seed0 --resume auto"
    ], said
    assert "/train: training a fresh run" in said and "resumed from" not in said, said


def test_resume_auto_in_a_new_run_dir_with_no_runs_about_is_not_warned_of(tmp_path):
    """A first launch with ``--resume auto`` (so that restarts go on with it) is the usual
    one: no warning where ``runs/`` holds nothing to resume (a launch's ``train/`` without
    checkpoints, a run directory of a refused launch)."""
    (tmp_path / "runs" / "refused").mkdir(parents=True)
    (tmp_path / "runs" / "K1" / "train").mkdir(parents=True)
    fresh = launch(*ONE_WORKER, "--", *SMALL, "--resume", "auto", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    assert "--resume auto after --" not in fresh.stdout + fresh.stderr


def test_the_warning_is_a_json_object_where_the_train_arguments_ask_for_json(tmp_path):
    _trained_by_distconv_train(tmp_path)
    argv = (*SMALL, "--resume", "auto", "--log-format", "json")
    fresh = launch(*ONE_WORKER, "--", *argv, cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    first = json.loads(fresh.stderr.splitlines()[0])
    assert first["level"] == "warning" and first["role"] == "launcher", first
    assert first["message"].endswith("--out runs/synthetic-adam-seed0 --resume auto"), first


def _unmounted(tmp_path) -> None:
    """``runs/L3``, a launch whose ``train/checkpoints`` links to a disk not mounted yet."""
    (tmp_path / "runs" / "L3" / "train").mkdir(parents=True)
    (tmp_path / "runs" / "L3" / "train" / "checkpoints").symlink_to(tmp_path / "mnt" / "L3")


def test_resume_auto_beside_a_run_whose_disk_is_not_mounted_warns_naming_it(tmp_path):
    """No run to resume but one whose checkpoints link to nothing: the job trains afresh, and
    the warning says that run is not resumable now, rather than passing over it."""
    _unmounted(tmp_path)
    fresh = launch(*ONE_WORKER, "--", *SMALL, "--resume", "auto", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    warned = [line for line in fresh.stderr.splitlines() if "--resume auto after --" in line]
    assert len(warned) == 1, fresh.stderr
    assert warned[0].endswith(
        f"'{tmp_path}/runs' holds no run directory with checkpoints in its train/; not "
        "resumable now: runs/L3/train, whose checkpoints link to nothing (a disk not mounted "
        "yet?)"
    ), warned[0]


def test_resume_refused_names_a_run_whose_disk_is_not_mounted(tmp_path):
    _trained_by_distconv_train(tmp_path)
    _unmounted(tmp_path)
    refused = launch(*ONE_WORKER, "--", *SMALL, "--resume", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().endswith(
        "--out runs/synthetic-adam-seed0 --resume; not resumable now: runs/L3/train, whose "
        "checkpoints link to nothing (a disk not mounted yet?)"
    ), refused.stderr
