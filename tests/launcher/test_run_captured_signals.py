"""A stop signal while the launcher starts a query (``mpiexec --version``, ``distconv keys``)
never leaves the query running: :func:`launcher.interrupt.run_captured` in a real process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import job_env, job_processes

REPO = str(Path(__file__).resolve().parents[2])

#: arms the launcher's handlers, starts a Python thread that does not block signals (numpy's
#: BLAS threads do not either), and sends SIGTERM to itself once Popen's child runs (its pid
#: file written), before Popen returns. Where the signal was held off by the main thread's mask
#: only, the kernel gave it to the other thread, and its handler ran in the main thread at its
#: next switch between threads, inside Popen: the child left running with nothing holding its
#: pid
SIGNALLED_IN_POPEN = """
import os, signal, subprocess, sys, threading, time
from launcher import interrupt

interrupt.arm()

def switching():  # asks for the GIL every millisecond, as any busy Python thread does
    while True:
        time.sleep(0.001)

threading.Thread(target=switching, daemon=True).start()
started = subprocess.Popen._execute_child

def start_then_signal(self, *args, **kwargs):
    started(self, *args, **kwargs)
    while not os.path.exists(sys.argv[1]):
        pass  # until the query runs
    os.kill(os.getpid(), signal.SIGTERM)
    until = time.monotonic() + 0.3
    while time.monotonic() < until:
        pass  # bytecodes, switching threads: where a Python handler runs

subprocess.Popen._execute_child = start_then_signal
query = ["sh", "-c", 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 300', "_", sys.argv[1]]
try:
    interrupt.run_captured(query)
except interrupt.Interrupted as stopped:
    print("interrupted", stopped.signum, flush=True)
"""


@pytest.mark.timeout(60)
def test_a_stop_signal_while_popen_starts_the_query_leaves_it_not_running(tmp_path):
    pid_file = tmp_path / "query.pid"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": REPO}
    with job_env(env) as job:
        done = subprocess.run(
            [sys.executable, "-c", SIGNALLED_IN_POPEN, str(pid_file)],
            env=job,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.stdout.strip() == "interrupted 15", done
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + 5
        while pid in job_processes(job):
            assert time.monotonic() < deadline, f"the query {pid} outlived the launcher"
            time.sleep(0.05)
