"""The real ``distconv-launch`` as a subprocess, in an environment rid of another launcher's
rank variables: what the tests of the launcher's refusals and messages share."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.processes import run_job

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_KEYS", "DISTCONV_PSERVERS"):
    ENV.pop(_name, None)


def launch(*argv: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    """``python -m launcher ARGV`` in ``cwd``, its output captured as text; where it hangs past
    ``timeout``, it and every process of its job are killed (:func:`tests.processes.run_job`)."""
    return run_job([sys.executable, "-m", "launcher", *argv], env=ENV, timeout=timeout, cwd=cwd)


def wait_while_running(
    check: Callable[[], object], launcher: subprocess.Popen, what: str, limit: float = 30
) -> None:
    """Wait until ``check()`` holds, failing the test (naming ``what``) where ``launcher``
    ends first or ``limit`` seconds pass: an event, not a fixed pause."""
    deadline = time.monotonic() + limit
    while not check():
        assert launcher.poll() is None, f"the launcher ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {limit:g} s"
        time.sleep(0.001)
