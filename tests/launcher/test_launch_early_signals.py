"""A stop signal before the supervisor's handlers (launcher.interrupt): while the launcher
imports, or waits for a question it asked another program, it ends the launch with one line
and 128 + the signal, and stops the program it waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.launcher.launch_cli import ENV

NUMPY_LOADED = b"_multiarray_umath"  # numpy's core library: cli's imports are under way


def _start(argv: list[str], cwd) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "launcher", *argv],
        env=ENV,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(check, launcher: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert launcher.poll() is None, f"the launcher ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within 30 s"
        time.sleep(0.001)


def _maps(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps:
            return maps.read()
    except OSError:
        return b""


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("signum", "said"),
    [
        (signal.SIGINT, "interrupted before the job started"),
        (signal.SIGTERM, "stopped by SIGTERM before the job started"),
        (signal.SIGHUP, "stopped by SIGHUP before the job started"),
    ],
)
def test_a_stop_signal_while_the_launcher_imports_is_one_line(tmp_path, signum, said):
    """Ctrl-C printed a traceback from an import; SIGTERM and SIGHUP ended it without a word."""
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", str(tmp_path / "run")]
    launcher = _start([*argv, "--", "true"], tmp_path)
    try:
        _wait_for(lambda: NUMPY_LOADED in _maps(launcher.pid), launcher, "numpy's import")
        launcher.send_signal(signum)
        _, stderr = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    assert "Traceback" not in stderr
    assert stderr.strip() == f"distconv-launch local: {said}"
    assert launcher.returncode == 128 + signum
    assert not (tmp_path / "run").exists()  # the job never started


@pytest.mark.timeout(90)
def test_sigterm_while_the_launcher_asks_mpiexec_stops_it_and_says_so(tmp_path):
    """SIGTERM during `mpiexec --version`: the launcher died silently (-15), and left it."""
    slow = tmp_path / "mpiexec"
    pid_file = tmp_path / "mpiexec.pid"
    slow.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    slow.chmod(0o755)
    argv = ["mpi", "-np", "1", "--mpiexec", str(slow), "--run-dir", str(tmp_path / "run")]
    launcher = _start([*argv, "--", "--epochs", "1"], tmp_path)
    try:
        _wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), launcher, "mpiexec")
        launcher.send_signal(signal.SIGTERM)
        _, stderr = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    assert stderr.strip() == "distconv-launch mpi: stopped by SIGTERM before the job started"
    assert launcher.returncode == 143
    asked = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(asked, 0)
