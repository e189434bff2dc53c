"""``run_mpi`` kills every process of a job that runs past its timeout, an orphan included.

Its clean-up found the job as the processes under ``mpiexec`` by parent id: a process a rank
started and left (a daemon, double-forked, reparented to init) was outside that tree and
outlived the test. Every process of an ``mpiexec`` job now carries the mark of
:mod:`tests.processes` (Hydra hands its environment to the proxy and the ranks, and a rank's
children inherit it), and the job is whatever carries it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distconv.notes import notes_of
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = NEEDS_MPIEXEC

#: a rank that leaves a daemon (double-forked: init's child, not the rank's), then hangs
RANK = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", {tag!r}])
    os._exit(0)
os.wait()
time.sleep(120)
"""


def _alive(pid: int, tag: str) -> bool:
    """Whether ``pid`` is a live (not zombie) process whose command line holds ``tag``."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        return tag in Path(f"/proc/{pid}/cmdline").read_text() and "State:\tZ" not in status
    except OSError:
        return False


def _tagged(tag: str) -> list[int]:
    """The live processes whose command line holds ``tag``."""
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _alive(int(p.name), tag)
    ]


@pytest.mark.timeout(60)
def test_a_timed_out_job_leaves_no_process_behind_not_even_an_orphan():
    tag = f"distconv-orphan-{secrets.token_hex(4)}"
    try:
        with pytest.raises(subprocess.TimeoutExpired) as raised:
            run_mpi(["-n", "1", sys.executable, "-c", RANK.format(tag=tag)], timeout=4)
        said = "".join(notes_of(raised.value))  # run_job's note
        assert "processes of the job" in said, said
        deadline = time.monotonic() + 5
        while _tagged(tag) and time.monotonic() < deadline:  # a SIGKILL is not instant
            time.sleep(0.1)
        assert _tagged(tag) == [], "the rank's daemon outlived the job's timeout"
    finally:  # the test passed or not, the daemon goes
        for pid in _tagged(tag):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
