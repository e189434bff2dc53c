"""Each attempt's lines in ``logs/<role>-<rank>.log`` begin with a marker line: the logs of a
run directory are appended to by every attempt and every launch that reuses it (``--job-id S``
again), and their lines ran together, so an error of restart 1 read as one of the first
attempt. Real launches of a real worker program; the marker's words as the docs give them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.launcher.attempt_logs import logged, markers
from tests.launcher.launch_cli import launch
from tests.processes import job_left

#: ``python WORKER``: says its restart, and fails the first attempt of each launch (exit 3)
WORKER = """\
import os
import sys
restart = os.environ["DISTCONV_RESTART"]
print(f"restart {restart} of launch {os.environ['DISTCONV_LAUNCH']}", flush=True)
sys.exit(3 if restart == "0" else 0)
"""


def _launch(tmp_path: Path) -> str:
    """One launch of :data:`WORKER` as job ``s`` into ``tmp_path/run``, restarted once: its
    launch token, as the worker said it."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--max-restarts", "1", "--run-dir", "run",
        "--job-id", "s", "--", str(script), cwd=tmp_path, timeout=50,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert job_left(done.env, 5) == {}
    (token,) = set(re.findall(r"of launch (\S+)", done.stdout))
    return token


@pytest.mark.timeout(120)
def test_each_attempt_and_each_launch_begins_its_lines_with_a_marker(tmp_path):
    first, second = _launch(tmp_path), _launch(tmp_path)  # the run directory reused
    log = tmp_path / "run" / "logs" / "worker-0.log"
    stamp = r"started \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    expected = [
        rf"--- new launch {first} of job s: attempt 1, {stamp} ---",
        rf"--- launch {first} of job s: attempt 2 \(restart 1\), {stamp} ---",
        rf"--- new launch {second} of job s: attempt 1, {stamp} ---",
        rf"--- launch {second} of job s: attempt 2 \(restart 1\), {stamp} ---",
    ]
    said = markers(log)
    assert len(said) == 4 and all(map(re.fullmatch, expected, said)), said
    lines = log.read_text().splitlines()
    assert lines[1::2] == [  # each marker right before its attempt's lines
        f"restart {restart} of launch {token}" for token in (first, second) for restart in (0, 1)
    ], lines
    assert logged(log).decode().splitlines() == lines[1::2]


@pytest.mark.timeout(60)
def test_under_json_the_marker_is_a_json_line_like_the_worker_s(tmp_path):
    """A collector parsing a worker's log under ``--log-format json`` line by line met the
    marker as text: it is a JSON object there, its words the ``message``."""
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--job-id", "j", "--",
        "--epochs", "1", "--data", "mnist", "--data-dir", str(tmp_path / "none"),
        "--log-format", "json", cwd=tmp_path, timeout=50,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # its data is not there: one attempt
    lines = (tmp_path / "run" / "logs" / "worker-0.log").read_text().splitlines()
    objects = [json.loads(line) for line in lines]  # each line JSON
    marker = objects[0]
    assert re.fullmatch(
        r"--- new launch \S+ of job j: attempt 1, started \S+Z ---", marker["message"]
    )
    assert (marker["role"], marker["rank"], marker["job_id"], marker["restart"]) == (
        "worker",
        0,
        "j",
        0,
    )
    assert objects[-1]["level"] == "error", objects  # the worker's own last line follows it
