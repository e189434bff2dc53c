"""A ``--job-id`` the job cannot run under is a usage error naming it.

A blank one (an unset variable) was taken for none: the job ran under a new random id, in a
new ``runs/<id>``, so a launch again to continue started afresh elsewhere. One starting with
``-`` reached every shard's command line as a flag (``argument --job-id: expected one
argument``) and failed every attempt; ``.`` and ``..`` were refused as not made of ``.``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "job_id, said",
    [
        ("", "must not be empty"),
        ("-abc", "must not start with '-': '-abc'"),
        ("..", "'..' names no folder of its own (runs/..)"),
        ("a b", "must be letters, digits, '-', '_' or '.': 'a b'"),
    ],
)
@pytest.mark.parametrize("command", ["local", "mpi"])
def test_a_job_id_the_job_cannot_run_under_is_a_usage_error(tmp_path: Path, job_id, said, command):
    shape = ["--workers", "1", "--servers", "1"] if command == "local" else ["-np", "1"]
    done = launch(command, *shape, f"--job-id={job_id}", "--", "--epochs", "1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"distconv-launch {command}: error: argument --job-id: {said}", last
    assert list(tmp_path.iterdir()) == []  # no runs/ made, nothing started


def test_a_job_id_of_letters_digits_and_marks_is_taken(tmp_path: Path):
    done = launch(
        "mpi", "-np", "1", "--job-id", "Run-1.2_x", "--mpi-flavor", "mpich", "--dry-run", "--",
        "--epochs", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "DISTCONV_JOB_ID=Run-1.2_x " in done.stdout
