"""A stop signal while the launcher starts a query (``mpiexec --version``, ``distconv keys``)
never leaves the query running: :func:`launcher.interrupt.run_captured` in a real process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.child_env import child_path
from tests.processes import job_env, job_left, job_processes, run_job

REPO = str(Path(__file__).resolve().parents[2])

#: what each script starts with: the launcher's handlers armed, the query (which writes its pid
#: to the file named by argv[1], then sleeps), and ``spin``, which runs bytecodes for a while:
#: where a Python handler runs, and the main thread switches to another
HEAD = """
import os, signal, subprocess, sys, threading, time
from launcher import interrupt

interrupt.arm()
query = ["sh", "-c", 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 300', "_", sys.argv[1]]
started, kill = subprocess.Popen._execute_child, subprocess.Popen.kill

def spin(seconds):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass

def start_then_signal(self, *args, **kwargs):  # SIGTERM once the query runs, in Popen
    started(self, *args, **kwargs)
    while not os.path.exists(sys.argv[1]):
        pass
    os.kill(os.getpid(), signal.SIGTERM)
    spin(0.3)
"""
#: the end of each script: the query asked, the stop's signal printed
TAIL = """
try:
    interrupt.run_captured(query, timeout=TIMEOUT)
except interrupt.Interrupted as stopped:
    print("interrupted", stopped.signum, flush=True)
"""

#: starts a Python thread that does not block signals (numpy's BLAS threads do not either) and
#: sends SIGTERM from inside Popen. Where the signal was held off by the main thread's mask
#: only, the kernel gave it to the other thread, and its handler ran in the main thread at its
#: next switch between threads, inside Popen: the child left running with nothing holding its
#: pid
SIGNALLED_IN_POPEN = """
def switching():  # asks for the GIL every millisecond, as any busy Python thread does
    while True:
        time.sleep(0.001)

threading.Thread(target=switching, daemon=True).start()
subprocess.Popen._execute_child = start_then_signal
TIMEOUT = None
"""

#: a second stop signal (Ctrl-C after a SIGTERM) just before run_captured kills the query
#: it stops, by a SIGTERM in Popen or by its timeout: raised there, it left the query running.
#: With "handling", a SIGHUP too, handled at the first call run_captured's except path makes
#: (where CPython runs a handler whose signal came as the stop was raised): there the
#: launcher must already keep it, or the query is left running all the same
SIGNALLED_BEFORE_THE_KILL = """
def signal_then_kill(self):
    os.kill(os.getpid(), signal.SIGINT)
    spin(0.3)
    kill(self)

def signal_as_the_stop_is_handled(frame, event, arg):  # at the first call there
    caller = frame if event == "c_call" else frame.f_back
    if caller is not None and caller.f_code.co_name == "run_captured" and sys.exc_info()[1]:
        sys.setprofile(None)
        os.kill(os.getpid(), signal.SIGHUP)

subprocess.Popen.kill = signal_then_kill
if sys.argv[3:] == ["handling"]:  # and a third as its except path starts, before the kill
    sys.setprofile(signal_as_the_stop_is_handled)
if sys.argv[2] == "signal":
    subprocess.Popen._execute_child = start_then_signal
    TIMEOUT = None
else:
    TIMEOUT = 1.0
"""


def _query_stopped(tmp_path: Path, script: str, *args: str) -> str:
    """Run ``script`` between :data:`HEAD` and :data:`TAIL` in a process of its own; assert
    its query is gone within 5 s of its end; return what it printed."""
    pid_file = tmp_path / "query.pid"
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": child_path()}
    with job_env(env) as job:
        done = subprocess.run(
            [sys.executable, "-c", HEAD + script + TAIL, str(pid_file), *args],
            env=job,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done
        pid = int(pid_file.read_text())
        deadline = time.monotonic() + 5
        while pid in job_processes(job):
            assert time.monotonic() < deadline, f"the query {pid} outlived the launcher: {done}"
            time.sleep(0.05)
    return done.stdout.strip()


@pytest.mark.timeout(60)
def test_a_stop_signal_while_popen_starts_the_query_leaves_it_not_running(tmp_path):
    assert _query_stopped(tmp_path, SIGNALLED_IN_POPEN) == "interrupted 15"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("first", "landing", "said"),
    [
        ("signal", "kill", "interrupted 15"),
        ("timeout", "kill", "interrupted 2"),
        ("signal", "handling", "interrupted 15"),
        ("timeout", "handling", "interrupted 1"),
    ],
)
def test_a_second_stop_signal_before_the_kill_leaves_the_query_not_running(
    tmp_path, first, landing, said
):
    """After a SIGTERM the first signal's Interrupted is the one raised (the stop's cause, as
    the supervisor reports its first); after a timeout the first signal kept (the SIGHUP where
    one came as the stop was handled), not TimeoutExpired."""
    assert _query_stopped(tmp_path, SIGNALLED_BEFORE_THE_KILL, first, landing) == said


#: a ``kill_group`` query that sends the launcher SIGINT (armed where argv[1] is "armed", else
#: kept: deferred), then a second SIGINT once its group's leader is reaped (the first wait:
#: the stop's, or communicate's after the kept stop killed the group); prints the groups
#: killed with their leader reaped, their id free, then how run_captured ended
SECOND_STOP_ONCE_REAPED = """
import os, signal, subprocess, sys
from launcher import interrupt, process_group

freed, signal_group, wait = [], process_group.signal_group, subprocess.Popen.wait

def checked(group, signum):
    try:
        os.waitid(os.P_PID, group, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped: its id free, another's once reused
        freed.append(group)
        return
    signal_group(group, signum)

def wait_then_stop(self, *args, **kwargs):
    done = wait(self, *args, **kwargs)
    if not self.__dict__.get("stopped"):
        self.stopped = True
        os.kill(os.getpid(), signal.SIGINT)
    return done

process_group.signal_group, subprocess.Popen.wait = checked, wait_then_stop
interrupt.arm() if sys.argv[1] == "armed" else interrupt.defer()
query = ["sh", "-c", "kill -s INT $PPID; exec sleep 300"]
try:
    done = interrupt.run_captured(query, kill_group=True)
    print(freed, done.returncode, flush=True)
except interrupt.Interrupted as stopped:
    print(freed, "interrupted", stopped.signum, flush=True)
"""


@pytest.mark.parametrize(("launcher", "said"), [("armed", "interrupted 2"), ("deferred", "-9")])
def test_a_second_stop_once_the_group_is_reaped_kills_no_freed_group(tmp_path, launcher, said):
    """A stop kills the query's group, whose leader is then reaped: its id is free (another
    group's once the pid is reused), but the launcher still held the kill of it, and a second
    stop before run_captured's end sent SIGKILL to that id. The kill is dropped first."""
    argv = [sys.executable, "-c", SECOND_STOP_ONCE_REAPED, launcher]
    done = run_job(argv, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": child_path()}, timeout=30)
    assert done.stdout == f"[] {said}\n", done
    assert job_left(done.env, 3.0) == {}
