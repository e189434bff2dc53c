"""A run still training in an output directory, as a sweep meets one: a real ``distconv
train`` subprocess that holds the directory's lock while the test runs, killed with its job
at the end (:func:`tests.processes.job_env`)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distconv.run_files import LOCK
from tests.child_env import child_path
from tests.processes import job_env
from tests.test_cli import SMALL, distconv


@contextmanager
def run_going(cwd: Path, out: str, *flags: str) -> Iterator[str]:
    """Train one epoch into ``cwd/out`` (with ``flags``, a ``--job-id`` its claim records),
    then resume it for many more in the background; yields ``pid N on HOST``, the resumed
    run's lock as it holds it, once it does, and kills it after the block."""
    first = distconv("train", *SMALL, "--epochs", "1", "--out", out, *flags, cwd=cwd)
    assert first.returncode == 0, first.stderr
    argv = [sys.executable, "-m", "distconv", "train", *SMALL, "--epochs", "100000"]
    argv += ["--resume", "--out", out, *flags]
    with job_env(_env()) as env:
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            holder = f"pid {proc.pid} on {socket.gethostname()}"
            _wait_for(cwd / out / LOCK, holder, proc)
            yield holder
        finally:
            proc.kill()
            proc.wait(timeout=30)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": child_path()}


def _wait_for(lock: Path, holder: str, proc: subprocess.Popen, seconds: float = 60) -> None:
    """Wait until ``lock`` says ``holder`` holds it (the resumed run took it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the run ended first ({proc.returncode})"
        if lock.exists() and lock.read_text().strip() == holder:
            return
        time.sleep(0.05)
    raise AssertionError(f"{lock} was not taken by {holder} in {seconds} s")
