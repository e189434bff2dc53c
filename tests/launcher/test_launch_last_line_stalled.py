"""The launcher's last line before any job ran (a refusal), on a stderr that nobody reads, is
given up after a bound: printed straight there it blocked for good, a SIGTERM raised
out of the print, its traceback blocked in turn, and only a third SIGTERM ended it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, launcher_command, stalled_pipe
from tests.processes import job_env, job_left

#: a job of one worker, to which the tests add ``--run-dir`` and the program
LOCAL = ["local", "--workers", "1", "--servers", "0"]


def _refused(tmp_path: Path, argv: list[str]) -> tuple[int, float]:
    """The launcher's exit status for ``argv`` on a stderr full from the start, and the
    seconds it took to end (it is killed after 15: a hang)."""
    with job_env(ENV) as env, stalled_pipe() as write:
        started = time.monotonic()
        launcher = subprocess.Popen(
            [*launcher_command(), *argv], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
            stderr=write,
        )  # fmt: skip
        try:
            status = launcher.wait(timeout=15)
        finally:
            launcher.kill()
        assert job_left(env, 5) == {}
    return status, time.monotonic() - started


@pytest.mark.timeout(60)
def test_a_refusal_on_a_stalled_stderr_ends_the_launcher(tmp_path: Path):
    (tmp_path / "worker.py").write_text("print('never')\n")
    unmakeable = ["--run-dir", "/proc/distconv-nope"]  # not even root makes it: refused
    status, took = _refused(tmp_path, [*LOCAL, *unmakeable, "--", "worker.py"])
    assert status == 1 and took < 10, (status, took)


@pytest.mark.timeout(60)
def test_a_refusal_once_the_run_directory_is_held_ends_the_launcher(tmp_path: Path):
    """The same refusal after the launcher's first line ('job ...'), which its messages' own
    queue could not write: that queue's writer, blocked on the pipe, holds stderr's lock, so
    the print blocked even before the pipe, where no signal could end it."""
    (tmp_path / "prog").write_text("#!/bin/sh\necho never\n")  # not executable: refused
    status, took = _refused(tmp_path, [*LOCAL, "--run-dir", "run", "--", "./prog"])
    assert status == 1 and took < 10, (status, took)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("flags", [["--workers", "0"], ["--bogus"]], ids=["value", "unknown"])
def test_a_usage_error_on_a_stalled_stderr_ends_the_launcher(tmp_path: Path, flags: list[str]):
    """argparse's usage error, for a flag of the launcher's own, printed its usage straight to
    a stderr nobody reads, before the launcher arms its stop signals: it blocked there
    for good, and a SIGTERM was kept for later, which never came; only SIGKILL ended it."""
    status, took = _refused(tmp_path, ["local", *flags, "--", "worker.py"])
    assert status == 2 and took < 10, (status, took)
