"""The stop signals around a launcher's query (``mpiexec --version``, ``distconv keys``) that
:func:`launcher.interrupt.run_captured` waits for: a query in a thread other than the main one
leaves the main thread's stops alone, and a stop kept before the launcher is armed, which kills
the query, ends the launch as a stop, not as the query's empty answer. Each in a real
process, whose signals are its own."""

from __future__ import annotations

import sys

import pytest

from tests.child_env import child_path
from tests.processes import job_left, run_job

#: the main thread armed, as a launch's, while a launch in another thread asks a query that
#: starts a grandchild and hangs, past its 1.5 s bound: a SIGTERM comes as the thread's Popen
#: starts it (the thread then lets the main one run a while); the main thread waits for the
#: thread, and prints how each ended
THREAD_QUERY = """
import os, signal, subprocess, threading, time
from launcher import interrupt

interrupt.arm()
query = ["sh", "-c", "sleep 300 & wait"]
ended, started = [], subprocess.Popen._execute_child

def start_then_signal(self, *args, **kwargs):
    started(self, *args, **kwargs)
    if threading.current_thread() is not threading.main_thread():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.3)  # the main thread runs its handler meanwhile

subprocess.Popen._execute_child = start_then_signal

def ask():
    try:
        ended.append(interrupt.run_captured(query, timeout=1.5, kill_group=True).returncode)
    except BaseException as exc:
        ended.append(type(exc).__name__)

thread = threading.Thread(target=ask)
try:  # the start too: under load the thread's SIGTERM may come before the loop
    thread.start()
    while thread.is_alive():
        time.sleep(0.05)
    print("main not stopped", flush=True)
except interrupt.Interrupted as stop:
    print("main interrupted", stop.signum, flush=True)
thread.join()
print("thread", *ended, flush=True)
"""


def _run(script: str, *argv: str) -> str:
    """The output of ``python -c script argv`` in a job of its own, once nothing of the job is
    left (what its queries started included)."""
    argv = [sys.executable, "-c", script, *argv]
    done = run_job(argv, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": child_path()}, timeout=30)
    assert job_left(done.env, 3.0) == {}
    return done.stdout


def test_a_query_in_another_thread_leaves_the_main_threads_stops_alone():
    """A launch run in a thread by a library caller disarmed the main thread's launch while
    its query started, and while it was killed (``distconv keys``: up to 120 s): a SIGTERM
    then was kept, not raised, killed the thread's query instead, then raised in the thread.
    Now the main thread is stopped, and the thread's query runs till its own bound, which
    kills its group (the grandchild too)."""
    said = _run(THREAD_QUERY)
    assert said == "main interrupted 15\nthread TimeoutExpired\n", said


#: the launcher's stops kept (:func:`launcher.interrupt.defer`, as its first step does), not
#: armed yet, while it asks ``argv[2]``, a query that sends it SIGTERM and hangs: ``mpi`` asks
#: it as ``mpiexec --version``, ``keys`` as ``distconv keys`` (into ``argv[3]``); prints how
#: the asking ended
KEPT_STOP = """
import sys
from pathlib import Path
from launcher import interrupt, job_keys, mpi

interrupt.defer()
query = sys.argv[2]
job_keys.keys_command = lambda keys_dir, workers: [query]
ask = {
    "mpi": lambda: mpi.detect_flavor(query),
    "keys": lambda: job_keys.make_keys(Path(sys.argv[3]), 2),
}
try:
    print("returned", ask[sys.argv[1]](), flush=True)
except interrupt.Interrupted as stop:
    print("interrupted", stop.signum, flush=True)
except Exception as exc:
    print(type(exc).__name__, exc, flush=True)
"""


@pytest.mark.parametrize("asked", ["mpi", "keys"])
def test_a_stop_kept_before_arming_that_kills_the_query_is_a_stop(tmp_path, asked):
    """A stop that comes before the launcher is armed kills the query's group (the launch ends
    on it), and the query's death read as its answer: ``unknown MPI: `mpiexec --version` says
    ''`` or ``distconv keys failed …: (no output)``. It is the stop, raised."""
    query = tmp_path / "query"
    query.write_text("#!/bin/sh\nkill -s TERM $PPID\nexec sleep 300\n")
    query.chmod(0o755)
    said = _run(KEPT_STOP, asked, str(query), str(tmp_path / "keys"))
    assert said == "interrupted 15\n", said


#: a caller's own deferral (:func:`launcher.interrupt.defer`), never armed: asks ``mpiexec
#: --version`` of ``argv[1]`` (which sends it SIGTERM and hangs), then of ``argv[2]`` (which
#: answers Open MPI), then of ``argv[2]`` twice after a Ctrl-C of its own; prints each answer
KEPT_STOP_ONCE = """
import os, signal, sys
from launcher import interrupt, mpi

interrupt.defer()
stopping, answering = sys.argv[1:3]

def ask(query):
    try:
        return mpi.detect_flavor(query)
    except interrupt.Interrupted as stop:
        return f"interrupted {stop.signum}"

print(ask(stopping), ask(answering), flush=True)
os.kill(os.getpid(), signal.SIGINT)  # the caller's own Ctrl-C, kept while it defers
print(ask(answering), ask(answering), interrupt.kept(), flush=True)
"""


def test_a_kept_stop_raised_by_a_query_is_raised_once(tmp_path):
    """The stop a query raised (``kept_stops``) stayed kept: every later query of the caller
    was killed at once and raised it again, and the caller's next Ctrl-C was only kept with
    it. It is raised once: the next query answers, and the next stop is raised in
    turn, by the query it kills, once."""
    stopping, answering = tmp_path / "stopping", tmp_path / "answering"
    stopping.write_text("#!/bin/sh\nkill -s TERM $PPID\nexec sleep 300\n")
    answering.write_text("#!/bin/sh\necho 'mpiexec (Open MPI) 4.1.0'\n")
    for query in (stopping, answering):
        query.chmod(0o755)
    said = _run(KEPT_STOP_ONCE, str(stopping), str(answering))
    assert said == "interrupted 15 openmpi\ninterrupted 2 openmpi None\n", said
