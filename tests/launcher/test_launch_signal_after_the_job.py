"""A stop signal as the supervisor gives the launcher's signals back, once the job has ended
(:meth:`launcher.supervisor.Supervisor.run`'s end): the job's status stands. Raised there by
:mod:`launcher.interrupt`'s handler, it read "stopped by SIGTERM before the job started",
with 143 for a job that had run and succeeded."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV
from tests.processes import job_env

#: runs ``distconv-launch local`` (cli.main, its handlers armed as the command's) on a job of
#: ``true``, and sends itself SIGTERM right where the supervisor hands a stop signal back to
#: launcher.interrupt's handler, then runs bytecodes (where a Python handler runs)
SCRIPT = """
import os, signal, sys, time
from launcher import cli, interrupt

restore, taken = signal.signal, []

def watching(signum, handler):
    previous = restore(signum, handler)
    if type(getattr(handler, "__self__", None)).__name__ == "Arrivals":
        taken.append(signum)  # the supervisor's own handlers are in
    elif taken and handler is interrupt._on_signal and signum == signal.SIGTERM:
        os.kill(os.getpid(), signal.SIGTERM)
        until = time.monotonic() + 0.3
        while time.monotonic() < until:
            pass
    return previous

signal.signal = watching
status = cli.main(["local", "--workers", "1", "--run-dir", sys.argv[1], "--", "true"])
print("status", status, "handed back", sorted(map(int, taken)), flush=True)
from launcher.supervisor import Supervisor
Supervisor(sys.argv[1]).claim()  # the run directory's lock went with the supervisor's end
print("claimed again", flush=True)
"""


@pytest.mark.timeout(90)
def test_a_stop_signal_as_the_supervisor_hands_the_signals_back_keeps_the_jobs_status(tmp_path):
    with job_env(ENV) as env:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "run")],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.stdout == "status 0 handed back [1, 2, 15]\nclaimed again\n", done
    assert "before the job started" not in done.stderr, done.stderr
