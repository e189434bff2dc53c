"""What ``distconv train`` says where a resume finds nothing to resume: the runs ``runs/``
holds in both layouts, each with the ``--out`` that resumes it, and, for ``--resume auto``
into any output directory, a line saying that a fresh run begins there.

The hint named only ``runs/<name>`` (``distconv train``'s own runs), never a launch's
``runs/<job-id>/train``, and told the user to pass ``--out runs/NAME``, wrong for a launch's
run; ``--resume auto`` into a mistyped ``--out`` trained from scratch without a word. Real
subprocesses on real folders."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.child_env import child_env
from tests.processes import CompletedJob, run_job

pytestmark = pytest.mark.timeout(120)

SMALL = ("--data", "synthetic", "--batch-size", "32", "--no-progress", "--epochs", "1")


def _train(*args: str, cwd: Path) -> CompletedJob:
    """``distconv train`` on a small synthetic set (one epoch unless ``args`` say more)."""
    argv = [sys.executable, "-m", "distconv", "train", *SMALL, *args]
    return run_job(argv, env=child_env(), timeout=60, cwd=cwd)


def _trained(*args: str, cwd: Path) -> None:
    done = _train(*args, cwd=cwd)
    assert done.returncode == 0, done.stderr


def test_a_resume_into_an_empty_default_names_the_runs_of_both_layouts_with_their_out(
    tmp_path,
):
    """A run of ``distconv train`` (``runs/synthetic-adam-seed0``) and one in a launch's layout
    (``runs/L1/train``, written by the same command a launch's worker runs): both are named,
    each with the ``--out`` to pass, and the one named for the launch's run resumes it."""
    _trained(cwd=tmp_path)
    _trained("--optimizer", "sgd", "--out", "runs/L1/train", cwd=tmp_path)
    _trained("--optimizer", "sgd", "--out", "runs/L0/train", cwd=tmp_path)
    (tmp_path / "runs" / "L0" / "train" / "checkpoints").rename(tmp_path / "elsewhere")
    for when, checkpoints in enumerate(
        ["synthetic-adam-seed0/checkpoints", "L1/train/checkpoints"]
    ):
        os.utime(tmp_path / "runs" / checkpoints, (1_000_000 + when, 1_000_000 + when))

    refused = _train("--optimizer", "sgd", "--resume", cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    errors = [line for line in refused.stderr.splitlines() if "error:" in line]
    assert errors == [
        "distconv train: error: --resume: no run in runs/synthetic-sgd-seed0, the default --out "
        "for --data synthetic --optimizer sgd --seed 0 (a resumed run keeps the data, optimizer "
        "and seed it began with); runs/ holds runs to resume: pass --out runs/L1/train or "
        "--out runs/synthetic-adam-seed0 (newest first)"  # L0 holds no checkpoint: not named
    ], refused.stderr

    resumed = _train(
        "--optimizer", "sgd", "--out", "runs/L1/train", "--resume", "--epochs", "2", cwd=tmp_path
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from runs/L1/train/checkpoints/step-00000012" in resumed.stderr
    assert "epoch 2/2" in resumed.stderr


@pytest.mark.parametrize("there", ["missing", "empty"])
def test_resume_auto_into_a_given_out_with_nothing_to_resume_says_it_trains_afresh(tmp_path, there):
    """An ``--out`` typed wrong (not there) or a folder made beforehand: one line on the chief
    says a fresh run begins and where; once there is a checkpoint it resumes, without it."""
    out = tmp_path / "typo"
    if there == "empty":
        out.mkdir()
    said = f"--resume auto: no checkpoint in {out}: training a fresh run"
    fresh = _train("--out", str(out), "--resume", "auto", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    assert [line for line in fresh.stderr.splitlines() if said in line] != [], fresh.stderr
    assert fresh.stderr.count(said) == 1, fresh.stderr

    again = _train("--out", str(out), "--resume", "auto", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "resumed from" in again.stderr and said not in again.stderr, again.stderr


def test_resume_auto_into_a_new_default_says_it_once_naming_the_default(tmp_path):
    """The default's own line (its flags, the runs beside it) is the only one: the setup's
    line of the same fact is not said again under it."""
    _trained(cwd=tmp_path)
    fresh = _train("--seed", "1", "--resume", "auto", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    fresh_lines = [line for line in fresh.stderr.splitlines() if "training a fresh run" in line]
    assert len(fresh_lines) == 1, fresh.stderr
    assert fresh_lines[0].endswith(
        "--resume auto: no run in runs/synthetic-adam-seed1, the default --out for --data "
        "synthetic --optimizer adam --seed 1: training a fresh run; runs/ holds runs to resume: "
        "pass --out runs/synthetic-adam-seed0 (newest first)"
    ), fresh_lines[0]
