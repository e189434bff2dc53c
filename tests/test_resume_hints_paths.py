"""The resume hints on paths that do not print plainly: ``--resume auto``'s fresh-run line
names an ``--out`` with a line break in it on one line, quoted as it pastes back; and a run
whose checkpoints link to a disk not mounted yet is named as not resumable now, not passed
over in silence. Real subprocesses and real folders."""

from __future__ import annotations

import os

from distconv.run_listing import unmounted_runs
from tests.test_resume_hints_train import _train, _trained


def test_resume_autos_fresh_run_line_quotes_an_out_with_a_line_break(tmp_path):
    fresh = _train("--out", "a\nb", "--resume", "auto", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    said = [line for line in fresh.stderr.splitlines() if "training a fresh run" in line]
    assert len(said) == 1 and "no checkpoint in $'a\\nb': training" in said[0], fresh.stderr


def test_a_run_whose_checkpoints_link_to_nothing_is_named_not_resumable_now(tmp_path):
    _trained(cwd=tmp_path)  # runs/synthetic-adam-seed0, resumable
    for run in ("runs/gone", "runs/L3/train"):  # both layouts, their disk not mounted
        os.makedirs(tmp_path / run)
        (tmp_path / run / "checkpoints").symlink_to(tmp_path / "mnt" / "disk" / run)
    assert unmounted_runs(tmp_path / "runs") == [
        str(tmp_path / "runs" / "L3" / "train"),
        str(tmp_path / "runs" / "gone"),
    ]
    fresh = _train("--seed", "1", "--resume", "auto", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    assert (
        "runs/ holds runs to resume: pass --out runs/synthetic-adam-seed0 (newest first); "
        "not resumable now: runs/L3/train or runs/gone, whose checkpoints link to nothing "
        "(a disk not mounted yet?)"
    ) in fresh.stderr, fresh.stderr
