"""A child whose threads cannot start (``can't start new thread``: a container's pids limit)
is not left running: :class:`launcher.child.Child` raised with its process started and held
by nothing, so no stop reached its group, and what its leader started outlived the launcher."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.launcher.launch_cli import ENV
from tests.processes import job_env, job_processes

#: a supervisor whose child's pump or waiter thread (the name's start in argv[3]) cannot start,
#: once the child has started a grandchild in its group (the marker written): the error printed
SCRIPT = """
import os, sys, threading
from launcher.supervisor import ChildSpec, Supervisor

run, marker, failed = sys.argv[1:]
start = threading.Thread.start

def failing(self):
    if not self.name.startswith(failed):
        return start(self)
    while not os.path.exists(marker):
        pass
    raise RuntimeError("can't start new thread")

threading.Thread.start = failing
argv = ["sh", "-c", 'sleep 300 & touch "$1"; wait', "_", marker]
try:
    Supervisor(run, grace=5).run(lambda restart: [ChildSpec("worker", 0, argv)])
except RuntimeError as exc:
    print("raised", exc, flush=True)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("thread", ["pump-", "wait-"])
def test_a_child_whose_threads_cannot_start_leaves_nothing_of_its_group(tmp_path, thread):
    with job_env(ENV) as env:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                SCRIPT,
                str(tmp_path / "run"),
                str(tmp_path / "started"),
                thread,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.stdout == "raised can't start new thread\n", done
        deadline = time.monotonic() + 5  # a killed process's end is not instant
        while job_processes(env) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job_processes(env) == {}
