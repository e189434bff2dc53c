"""``distconv-launch`` says which distconv it is (:func:`distconv.build_id`), as ``distconv
--version`` does: its ``--version``, the line that starts a job and the failure report
(``failure.json``), so an operator can tell which code a job ran. Real launcher processes and
children; the launcher runs this checkout, so its build is this test's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distconv
from launcher.shown import shown
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip

pytestmark = pytest.mark.timeout(60)

FAIL = ["--", "sh", "-c", "exit 3"]


def test_version_says_the_launchers_build(tmp_path: Path):
    done = launch("--version", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"distconv-launch {distconv.build_id()}\n",
        "",
    )


def test_a_local_jobs_start_line_and_failure_report_name_the_build(tmp_path: Path):
    argv = [
        "local",
        "--workers",
        "1",
        "--servers",
        "0",
        "--job-id",
        "j",
        "--run-dir",
        str(tmp_path / "run"),
    ]
    done = launch(*argv, *FAIL, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    first = done.stderr.splitlines()[0]
    logs = tmp_path / "run" / "logs"
    assert first == (
        f"distconv-launch: job j: 1 worker(s), 0 server(s); logs in {shown(logs)}; "
        f"distconv {distconv.build_id()}"
    )
    assert json.loads((tmp_path / "run" / "failure.json").read_text())["build"] == (
        distconv.build_id()
    )


def test_an_mpi_jobs_start_line_names_the_build(tmp_path: Path):
    mpiexec_or_skip()
    argv = ["mpi", "-np", "1", "--job-id", "j", "--run-dir", str(tmp_path / "run")]
    done = launch(*argv, *FAIL, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("distconv-launch: job j: 1 rank(s) under ")
    assert first.endswith(f"; distconv {distconv.build_id()}")
    assert json.loads((tmp_path / "run" / "failure.json").read_text())["build"] == (
        distconv.build_id()
    )
