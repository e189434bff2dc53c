"""The notice of the launcher's messages a stalled output dropped names ``failure.json`` where
the failure report among them was written: it found that out by matching the text of
the report's last line (``report: PATH``); :func:`launcher.failure.write_report` now returns
the file itself, or None where it could not write it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from launcher.failure import Failure, write_report
from launcher.terminal import QUEUE_BYTES
from tests.launcher.launch_cli import ENV, start_unread, wait_while_running
from tests.processes import job_env, job_left

#: a worker whose lines fill the launcher's queue and its stdout pipe, then fails
FAILS = f"""\
import sys
for i in range({(QUEUE_BYTES + 128 * 1024) // 100}):
    sys.stdout.write("x" * 99 + "\\n")
sys.stdout.flush()
raise SystemExit(3)
"""


def _failure(tmp_path: Path) -> Failure:
    return Failure(
        role="worker", rank=0, exit_code=3, signal=None, log=str(tmp_path / "w.log"),
        tail=["boom"], restart=0,
    )  # fmt: skip


def test_write_report_returns_the_file_it_wrote_or_none(tmp_path: Path):
    path = tmp_path / "failure.json"
    assert write_report(path, _failure(tmp_path), 0, None) == (f"report: '{path}'", path)
    nowhere = tmp_path / "gone" / "failure.json"  # its folder is missing: not written
    said, written = write_report(nowhere, _failure(tmp_path), 0, None)
    assert written is None and said.startswith("report not written: "), said


@pytest.mark.timeout(60)
def test_a_dropped_failure_report_is_named_in_the_notice(tmp_path: Path):
    """stdout and stderr one pipe (``2>&1`` into a paused pager): the report, a message on
    the children's queue, is dropped at the stall; once the output moves, the notice says
    where the report is."""
    (tmp_path / "fails.py").write_text(FAILS)
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "fails.py"]
    report = tmp_path / "run" / "failure.json"
    with job_env(ENV) as env:
        launcher = start_unread(argv, env, tmp_path, subprocess.STDOUT)
        try:
            wait_while_running(report.exists, launcher, "failure.json")
            time.sleep(1.5)  # the report's message, stalled a second, dropped
            got = b""
            while chunk := os.read(launcher.stdout.fileno(), 1 << 16):  # the output moves
                got += chunk
            status = launcher.wait(timeout=20)
        finally:
            launcher.kill()
            launcher.stdout.close()
        assert job_left(env, 5) == {}
    assert status == 3
    said = f"the failure report among them is in '{report.resolve()}'".encode()
    assert said in got, got[-2000:]
