"""A resume into a run still training, as a sweep meets one: the hints that list runs to
resume mark it (``(running, pid N on HOST)``), and the refusal of its output directory names
the job that began it and the way on, where it said only "two runs must not share an output
directory", naming a worker's pid. Real subprocesses and files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch
from tests.run_going import run_going
from tests.test_cli import SMALL, _assert_one_line_error, distconv

pytestmark = pytest.mark.timeout(120)


def test_a_resume_into_a_run_still_going_names_its_job_and_the_way_on(tmp_path: Path):
    with run_going(tmp_path, "runs/lr0.03", "--job-id", "sweep-7") as holder:
        proc = distconv("train", *SMALL, "--resume", "--out", "runs/lr0.03", cwd=tmp_path)
    _assert_one_line_error(
        proc,
        f"runs/lr0.03 is in use by {holder} (job sweep-7): that run is still going; wait for "
        "it to end (or stop it) to go on with this run, or choose another --out",
    )


def test_a_run_still_going_that_no_job_began_is_named_by_its_pid_alone(tmp_path: Path):
    with run_going(tmp_path, "runs/a") as holder:
        proc = distconv("train", *SMALL, "--out", "runs/a", cwd=tmp_path)
    _assert_one_line_error(proc, f"runs/a is in use by {holder}: that run is still going; ")


def test_the_runs_to_resume_beside_the_default_out_mark_a_run_still_going(tmp_path: Path):
    with run_going(tmp_path, "runs/lr0.03") as holder:
        proc = distconv("train", *SMALL, "--seed", "5", "--resume", cwd=tmp_path)
    _assert_one_line_error(
        proc,
        f"; runs/ holds runs to resume: pass --out runs/lr0.03 (running, {holder}) (newest first)",
    )


def test_the_launcher_s_runs_to_resume_mark_a_run_still_going(tmp_path: Path):
    with run_going(tmp_path, "runs/lr0.03") as holder:
        done = launch("local", "--workers", "1", "--", *SMALL, "--resume", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    said = f"pass its --out after --: --out runs/lr0.03 --resume (running, {holder})"
    assert said in done.stderr, done.stderr
