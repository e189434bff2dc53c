"""A stop signal that lands while ``Popen()`` starts the launcher's ``mpiexec --version`` (or
its ``distconv keys``): raised inside ``Popen()``, nothing held the child's pid, and it ran on
after the launcher (CI: ``test_sigterm_while_the_launcher_asks_mpiexec_stops_it_and_says_so``
found the fake mpiexec alive). The test makes the signal land there every time: the launcher's
process sends itself SIGTERM from inside ``Popen()``, right after the child has started."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_supervision import alive

# runs the launcher's query in a process of its own, with its stop handlers armed
SCRIPT = """
import os, signal, subprocess, sys
from launcher import interrupt, mpi

started = subprocess.Popen._execute_child

def start_then_signal(self, *args, **kwargs):
    started(self, *args, **kwargs)  # the child runs: only Popen() is not done yet
    os.kill(os.getpid(), signal.SIGTERM)

subprocess.Popen._execute_child = start_then_signal
interrupt.defer()
interrupt.arm()
try:
    mpi.detect_flavor(sys.argv[1])
except interrupt.Interrupted as stop:
    print("interrupted", stop.signum, flush=True)
"""


def _running(marks: list[bytes]) -> list[int]:
    """The processes, zombies aside, whose command line holds one of ``marks``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            line = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and any(m in line for m in marks) and alive(int(proc.name)):
            found.append(int(proc.name))
    return found


@pytest.mark.timeout(60)
def test_a_stop_signal_while_popen_starts_the_query_leaves_no_child_running(tmp_path):
    fake = tmp_path / "mpiexec"
    seconds = f"{60 + random.random():.9f}"  # this test's own: no other sleep has it
    fake.write_text(f"#!/bin/sh\nexec sleep {seconds}\n")
    fake.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(fake)], capture_output=True, text=True, timeout=50
    )
    assert done.stdout == "interrupted 15\n", done.stderr
    marks = [str(fake).encode(), f"sleep\0{seconds}".encode()]
    deadline = time.monotonic() + 5  # a killed child's exit is not instant
    while _running(marks) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(marks) == []
