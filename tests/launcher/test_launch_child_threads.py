"""A child whose threads cannot start (``can't start new thread``: a container's pids limit)
is not left running: :class:`launcher.child.Child` raised with its process started and held
by nothing, so no stop reached its group, and what its leader started outlived the launcher.
``distconv-launch`` then says so on one line, not with a traceback."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.launcher.launch_cli import ENV
from tests.processes import job_env, job_processes

#: a supervisor whose child's pump or waiter thread (the name's start in argv[3]) cannot start,
#: once the child has started a grandchild in its group (the marker written): the error printed
HEAD = """
import os, sys, threading

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
"""
#: the supervisor on its own: the error it raises
SUPERVISED = """
from launcher.supervisor import ChildSpec, LaunchError, Supervisor

try:
    Supervisor(run, grace=5).run(lambda restart: [ChildSpec("worker", 0, argv)])
except LaunchError as exc:
    print("raised", exc, flush=True)
"""
#: ``distconv-launch local`` called as a function: its status (its one line on stderr)
LAUNCHED = """
from launcher import cli

local = ["local", "--workers", "1", "--servers", "0", "--run-dir", run]
print(cli.main([*local, "--", *argv]), flush=True)
"""
#: what the launcher says of it
SAID = "cannot start worker-0's threads: can't start new thread (a limit on processes or threads?)"


def _run(tmp_path, script: str, thread: str) -> subprocess.CompletedProcess:
    """``script`` after :data:`HEAD` in a real process, whose job is then checked gone."""
    with job_env(ENV) as env:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                HEAD + script,
                str(tmp_path / "run"),
                str(tmp_path / "started"),
                thread,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        deadline = time.monotonic() + 5  # a killed process's end is not instant
        while job_processes(env) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert job_processes(env) == {}
    return done


@pytest.mark.timeout(60)
@pytest.mark.parametrize("thread", ["pump-", "wait-"])
def test_a_child_whose_threads_cannot_start_leaves_nothing_of_its_group(tmp_path, thread):
    done = _run(tmp_path, SUPERVISED, thread)
    assert done.stdout == f"raised {SAID}\n", done


@pytest.mark.timeout(60)
@pytest.mark.parametrize("thread", ["pump-", "wait-"])
def test_the_launcher_says_so_on_one_line(tmp_path, thread):
    done = _run(tmp_path, LAUNCHED, thread)
    assert done.stdout == "1\n", done
    assert done.stderr.splitlines()[-1] == f"distconv-launch local: error: {SAID}", done.stderr
    assert "Traceback" not in done.stderr, done.stderr
