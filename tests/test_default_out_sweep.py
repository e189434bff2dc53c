"""A sweep over ``--lr`` that leaves ``--out`` to its default
(``runs/<data>-<optimizer>-seed<seed>``, named by no other setting): its second point met the
first's run and was told to pass ``--resume`` (refused: another learning rate) or
``--overwrite`` (which deleted the first point's run), never that the default is the same for
both, nor that an ``--out`` of its own keeps both. Real subprocesses and files."""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.checkpoint import load_checkpoint
from distconv.held_run import differences_from, recorded_facts
from distconv.run_dir import CHIEF, RunDirectory
from tests.run_going import run_going
from tests.test_cli import SMALL, _assert_one_line_error, distconv

pytestmark = pytest.mark.timeout(120)

DEFAULT = "runs/synthetic-adam-seed0"
#: what each refusal of the default --out now adds
NAMED_BY = (
    f"{DEFAULT} is the default --out for --data synthetic --optimizer adam --seed 0, whatever "
    "--lr and other settings say"
)
KEEP_BOTH = "give this run its own --out to keep both"


def _first_point(cwd: Path) -> bytes:
    """Train the sweep's first point (``--lr 0.001``) into the default; its metrics' bytes."""
    first = distconv("train", *SMALL, "--epochs", "1", "--lr", "0.001", cwd=cwd)
    assert first.returncode == 0, first.stderr
    return (cwd / DEFAULT / "metrics.jsonl").read_bytes()


def test_a_second_point_of_another_lr_is_told_which_setting_differs_and_to_keep_both(
    tmp_path: Path,
):
    metrics = _first_point(tmp_path)
    proc = distconv("train", *SMALL, "--epochs", "1", "--lr", "0.01", cwd=tmp_path)
    _assert_one_line_error(
        proc,
        f"error: {DEFAULT} already holds a run of other settings (optimizer.lr: checkpoint "
        f"0.001, this run 0.01), which no resume continues: {NAMED_BY}; {KEEP_BOTH} "
        "(--overwrite deletes that run)",
    )
    assert "pass --resume" not in proc.stderr  # which would be refused
    assert (tmp_path / DEFAULT / "metrics.jsonl").read_bytes() == metrics  # untouched


def test_the_settings_that_differ_are_listed_whole_whatever_their_values_hold(tmp_path: Path):
    """The list was cut out of ``--resume``'s refusal at its first ``).``: a value holding one
    (a script's data set's name) cut the list there, the settings after it unsaid."""
    _first_point(tmp_path)
    root = tmp_path / DEFAULT
    newest = RunDirectory(root).latest()
    assert newest is not None
    ours = {**recorded_facts(load_checkpoint(newest.part(CHIEF))), "seed": 3, "data": "a). b"}
    assert differences_from(root, ours) == [
        "seed: checkpoint 0, this run 3",
        "data: checkpoint 'synthetic', this run 'a). b'",
    ]


def test_a_second_run_of_the_same_settings_keeps_the_ways_on_and_adds_its_own_out(
    tmp_path: Path,
):
    _first_point(tmp_path)
    proc = distconv("train", *SMALL, "--epochs", "2", "--lr", "0.001", cwd=tmp_path)
    _assert_one_line_error(
        proc,
        f"error: {DEFAULT} already holds a run; pass --resume to continue it, --resume auto to "
        "continue it if it has a checkpoint, or --overwrite to replace it (in a script: "
        f"resume=True, 'auto' or 'overwrite'); {NAMED_BY}: {KEEP_BOTH} (--overwrite deletes "
        "that run)",
    )


def test_a_given_out_that_holds_a_run_keeps_its_own_words(tmp_path: Path):
    _first_point(tmp_path)
    proc = distconv("train", *SMALL, "--lr", "0.01", "--out", DEFAULT, cwd=tmp_path)
    _assert_one_line_error(proc, f"{DEFAULT} already holds a run; pass --resume to continue it")
    assert "default --out" not in proc.stderr


def test_a_point_started_beside_one_still_going_in_the_default_is_told_to_keep_both(
    tmp_path: Path,
):
    with run_going(tmp_path, DEFAULT) as holder:
        proc = distconv("train", *SMALL, "--lr", "0.01", cwd=tmp_path)
    _assert_one_line_error(
        proc,
        f"error: {DEFAULT} is in use by {holder}: that run is still going; wait for it to end "
        f"(or stop it) to go on with this run, or choose another --out; {NAMED_BY}: {KEEP_BOTH}",
    )


def test_a_resume_of_the_run_still_going_in_the_default_is_not_told_to_keep_both(
    tmp_path: Path,
):
    """--resume asked for the run there: the way on is to wait for it, not another --out."""
    with run_going(tmp_path, DEFAULT) as holder:
        proc = distconv("train", *SMALL, "--resume", cwd=tmp_path)
    _assert_one_line_error(proc, f"error: {DEFAULT} is in use by {holder}: that run is still")
    assert "default --out" not in proc.stderr and KEEP_BOTH not in proc.stderr
