"""A launch stopped before its job started, under ``-- --log-format json``: its one line is a
stop the user asked for, levelled as the launcher's other stop lines (``info``), not an
``error`` a collector would count as the job's failure. A real launcher, a real signal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV, wait_while_running
from tests.processes import job_env


@pytest.mark.timeout(90)
def test_a_json_launch_stopped_before_its_job_ends_on_an_info_line(tmp_path):
    """SIGTERM while the launcher asks a stand-in ``mpiexec`` its version (before the job)."""
    slow = tmp_path / "mpiexec"
    pid_file = tmp_path / "mpiexec.pid"
    slow.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    slow.chmod(0o755)
    argv = [
        sys.executable, "-m", "launcher", "mpi", "-np", "1", "--mpiexec", str(slow),
        "--run-dir", str(tmp_path / "run"), "--", "--epochs", "1", "--log-format", "json",
    ]  # fmt: skip
    with job_env(ENV) as env:  # the stand-in's sleep goes too, whatever the launcher did
        launcher = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            written = lambda: pid_file.exists() and pid_file.read_text().strip()  # noqa: E731
            wait_while_running(written, launcher, "mpiexec")
            launcher.send_signal(signal.SIGTERM)
            _, stderr = launcher.communicate(timeout=60)
        finally:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 143, stderr
    last = json.loads(stderr.strip().splitlines()[-1])  # the last line, whole JSON
    assert last["message"] == "distconv-launch mpi: stopped by SIGTERM before the job started"
    assert (last["level"], last["role"]) == ("info", "launcher"), last
