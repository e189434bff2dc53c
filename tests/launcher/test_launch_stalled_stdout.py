"""A launcher whose stdout nobody reads no longer stalls its job.

Each child's pump wrote each line to the child's log, then to the launcher's stdout: a stdout
that nobody read (a paused pager, ``| (sleep 1000)``) blocked the pump on that write, so the
child on its pipe, and the log (the record) got no more lines. Now the pump hands the line to
a bounded queue (:class:`launcher.terminal.Terminal`) and goes on: the log gets every line and
the child finishes; what did not fit is dropped from the view, and once the output moves the
launcher says how many lines of which child were not shown and where the log is.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launcher.terminal import QUEUE_BYTES
from tests.launcher.attempt_logs import logged
from tests.launcher.launch_cli import (
    ENV,
    launcher_command,
    start_unread,
    stop_when,
    wait_while_running,
)
from tests.processes import job_env, job_left

#: lines of 100 bytes: the queue's bound and the pipe's 64 KiB twice over
LINES = 2 * QUEUE_BYTES // 100
#: a worker that prints them, numbered, at once
PRINTS = f"""\
import sys
for i in range({LINES}):
    sys.stdout.write(f"line {{i:08d}} " + "x" * 85 + "\\n")
"""


def _log_lines(log: Path) -> int:
    return logged(log).count(b"\n") if log.exists() else 0  # the worker's own lines


@pytest.mark.timeout(60)
def test_an_unread_stdout_holds_up_neither_the_job_nor_its_log(tmp_path: Path):
    (tmp_path / "prints.py").write_text(PRINTS)
    log = tmp_path / "run" / "logs" / "worker-0.log"
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
        launcher = start_unread(argv, env, tmp_path, err)
        try:  # stdout unread till the job's lines are all in the log
            wait_while_running(lambda: _log_lines(log) == LINES, launcher, "the whole log", 20)
            stdout, _ = launcher.communicate(timeout=30)
        finally:
            launcher.kill()
        assert job_left(env, 5) == {}
        err.seek(0)
        stderr = err.read()
    assert launcher.returncode == 0, stderr
    shown = re.findall(rb"^\[worker 0\] line (\d{8}) ", stdout, re.M)
    numbers = [int(n) for n in shown]
    assert numbers == sorted(numbers) and 0 < len(numbers) < LINES, len(numbers)
    said = re.search(
        rb"^distconv-launch: (\d+) line\(s\) of worker-0 not shown: the launcher's output was "
        rb"stalled \(nothing read it\); (.*) has them all$",
        stdout, re.M,
    )  # fmt: skip
    assert said is not None, stdout[-2000:]
    assert int(said[1]) == LINES - len(numbers) and said[2] == f"'{log.resolve()}'".encode()


@pytest.mark.timeout(60)
def test_a_stdout_stalled_for_good_lets_the_launcher_end(tmp_path: Path):
    """Nobody reads the launcher's stdout till it has ended: it ends, after its child and at
    most OUTPUT_DRAIN_SECONDS (cut to 0.5) of waiting on its view, naming what its output lacks;
    the log has every line."""
    (tmp_path / "prints.py").write_text(PRINTS)
    log = tmp_path / "run" / "logs" / "worker-0.log"
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    command = launcher_command(OUTPUT_DRAIN_SECONDS=0.5)
    with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
        launcher = start_unread(argv, env, tmp_path, err, command)
        try:
            status = launcher.wait(timeout=20)  # stdout unread all along
            launcher.stdout.close()
        finally:
            launcher.kill()
        assert job_left(env, 5) == {}
        err.seek(0)
        stderr = err.read()
    assert status == 0, stderr
    assert _log_lines(log) == LINES
    assert "the launcher's output did not take its last lines within 0.5 s" in stderr, stderr
    assert f" line(s) of worker-0 ('{log.resolve()}'): their logs have them" in stderr, stderr
    assert "Fatal Python error" not in stderr, stderr


@pytest.mark.timeout(60)
def test_a_stop_while_stdout_stalls_ends_the_launcher_promptly(tmp_path: Path):
    """SIGTERM to a launcher whose stdout nobody reads: the children stopped at once, but the
    launcher then sat out OUTPUT_DRAIN_SECONDS (5 s) on its stalled view, a second signal
    unheeded, before its 143. A stopped launcher gives up its view at the stall."""
    (tmp_path / "prints.py").write_text(PRINTS + "import time\ntime.sleep(60)\n")
    log = tmp_path / "run" / "logs" / "worker-0.log"
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
        launcher = start_unread(argv, env, tmp_path, err)
        try:  # stdout unread all along
            whole = lambda: _log_lines(log) == LINES  # noqa: E731
            status, took = stop_when(whole, launcher, "the whole log")
        finally:
            launcher.kill()
        assert job_left(env, 5) == {}
        err.seek(0)
        stderr = err.read()
    assert status == 143, stderr
    assert took < 3, (took, stderr)
    said = "the launcher's output is stalled on its last lines (nothing reads it), so it lacks "
    assert said in stderr and f" line(s) of worker-0 ('{log.resolve()}'): " in stderr, stderr
