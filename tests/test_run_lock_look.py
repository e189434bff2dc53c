"""A look at a run's lock, as the hints that list runs to resume take one
(:func:`distconv.run_holder.lock_holder`): it took the lock shared for a moment, and a run
starting in that directory at that moment was refused as in use, naming the lock's last
holder. A finished run's lock is now told free without taking it, and a run starting tries its
lock again for a moment. Real processes, files and locks."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from distconv.files import hold_lock
from distconv.run_dir import RunDirectory, RunDirError
from distconv.run_files import LOCK
from distconv.run_holder import lock_holder
from tests.child_env import child_path
from tests.processes import job_env

pytestmark = pytest.mark.timeout(60)

#: a child that looks at the lock of the directory it is given, again and again, for at most
#: 30 s, until that directory holds a file ``stop``; it says ``looking`` once it has begun
_LOOKS = """
import os, sys, time
from distconv.run_holder import lock_holder
root, deadline = sys.argv[1], time.monotonic() + 30
lock_holder(root)
print("looking", flush=True)
while time.monotonic() < deadline and not os.path.exists(os.path.join(root, "stop")):
    lock_holder(root)
"""


def test_a_run_starting_while_another_process_looks_at_its_lock_is_not_refused(tmp_path: Path):
    root = tmp_path / "runs" / "lr0.03"
    first = RunDirectory(root)
    first.acquire()  # a finished run's lock, whose words name a live process (this test)
    first.release()
    env = {**os.environ, "PYTHONPATH": child_path()}
    refused, starts = [], 0
    with job_env(env) as job:
        looks = subprocess.Popen(
            [sys.executable, "-c", _LOOKS, str(root)], env=job, stdout=subprocess.PIPE, text=True
        )
        try:
            assert looks.stdout is not None and looks.stdout.readline() == "looking\n"
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                run = RunDirectory(root)
                try:
                    run.acquire()
                except RunDirError as exc:
                    refused.append(str(exc))
                else:
                    run.release()
                starts += 1
        finally:
            (root / "stop").touch()
            looks.wait(timeout=30)
    assert starts > 50 and not refused, f"{len(refused)} of {starts} refused: {refused[:1]}"


def test_a_lock_whose_file_names_an_ended_process_is_told_free_without_taking_it(
    tmp_path: Path,
):
    """A run that has taken the lock and not yet written its name leaves its last holder's
    words: where they name an ended process, the look does not take the lock (which is held:
    a look that tried it would say so); where they name a live one, it does."""
    ended = subprocess.Popen([sys.executable, "-c", ""])
    ended.wait(timeout=30)
    fd = hold_lock(tmp_path / LOCK)  # held, as a run starting holds it
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {ended.pid} on {socket.gethostname()}\n".encode(), 0)
        assert lock_holder(tmp_path) is None
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        assert lock_holder(tmp_path) == f"pid {os.getpid()} on {socket.gethostname()}"
    finally:
        os.close(fd)
