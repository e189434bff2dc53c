"""A shard that fails the job on a rank silent past its ``--timeout`` says where that rank's
process on its own host is stopped (SIGSTOP, Ctrl-Z, a debugger): ``its process (pid N, on this
host) is stopped (...)``, why it said nothing, before the way out. Its words named the rank and
the wait only, the same for a stopped rank as for a slow one. A real process, really stopped."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distconv.straggler_words import RAISE_TIMEOUT
from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.processes import WORKER_STOPPED, ProcessWatch
from launcher.named_cause import told_rank
from tests.sync.ps.test_ps_processes import HOST, identity_of

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="needs Linux's /proc"),
]


#: a child that runs until it is killed
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]
#: ptrace(2)'s requests
PTRACE_ATTACH, PTRACE_DETACH = 16, 17


def _state(pid: int) -> str:
    """Process ``pid``'s state in ``/proc/PID/stat``."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _until(pid: int, states: str) -> None:
    """Wait until process ``pid`` is in one of ``states`` (a signal takes effect
    asynchronously)."""
    for _ in range(500):
        if _state(pid) in states:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} stayed in state {_state(pid)}, not one of {states}")


@pytest.fixture
def stopped() -> Iterator[subprocess.Popen]:
    """A child process stopped by SIGSTOP (killed at the test's end, stopped or not)."""
    child = subprocess.Popen(SLEEPER)
    try:
        child.send_signal(signal.SIGSTOP)
        _until(child.pid, "T")
        yield child
    finally:
        child.kill()
        child.wait()


def test_the_watch_names_a_stopped_process_and_not_a_running_one(stopped):
    watch = ProcessWatch()
    watch.track(1, identity_of(stopped.pid), HOST)
    assert watch.stopped(1) == stopped.pid
    assert watch.stopped(2) is None  # not followed
    stopped.send_signal(signal.SIGCONT)
    for _ in range(200):
        if watch.stopped(1) is None:
            break
        time.sleep(0.01)
    assert watch.stopped(1) is None


def test_a_process_a_debugger_holds_is_named_stopped():
    """A debugger that attached (gdb -p, ptrace) holds its process in a trace stop, state
    ``t``, not ``T``: as silent as a SIGSTOP's, and named so."""
    libc = ctypes.CDLL(None, use_errno=True)
    child = subprocess.Popen(SLEEPER)
    try:
        watch = ProcessWatch()
        watch.track(1, identity_of(child.pid), HOST)
        if libc.ptrace(PTRACE_ATTACH, child.pid, None, None) != 0:
            pytest.skip(f"ptrace refused: {os.strerror(ctypes.get_errno())}")
        os.waitpid(child.pid, 0)  # the attach's stop
        assert _state(child.pid) == "t"
        assert watch.stopped(1) == child.pid
        assert libc.ptrace(PTRACE_DETACH, child.pid, None, None) == 0
        _until(child.pid, "RS")
        assert watch.stopped(1) is None
    finally:
        child.kill()
        child.wait()


def test_a_stopped_process_that_ended_or_runs_elsewhere_is_not_named(stopped):
    """Stopped, then killed: a zombie (not reaped yet) has ended, and so has a reaped one; a
    process named as on another host is not followed, stopped or not (no ``/proc`` of its)."""
    watch = ProcessWatch()
    watch.track(1, identity_of(stopped.pid), HOST)
    watch.track(2, identity_of(stopped.pid), f"not-{HOST}")
    assert (watch.stopped(1), watch.stopped(2)) == (stopped.pid, None)
    stopped.kill()
    _until(stopped.pid, "Z")
    assert watch.stopped(1) is None
    stopped.wait()
    assert watch.stopped(1) is None


def _on_pid(pid: int) -> subprocess.Popen | None:
    """A new :data:`SLEEPER` on ``pid``, which the kernel is asked to hand out next
    (``/proc/sys/kernel/ns_last_pid``: root's); None where it will not, or another process
    took that pid first each time."""
    for _ in range(20):
        try:
            Path("/proc/sys/kernel/ns_last_pid").write_text(str(pid - 1))
        except OSError:
            return None
        child = subprocess.Popen(SLEEPER)
        if child.pid == pid:
            return child
        child.kill()
        child.wait()
    return None


def test_a_stopped_process_on_a_reused_pid_is_not_named():
    """The rank's process ended, and a later one took its pid and is stopped: that says nothing
    of the rank (the start time tells them apart)."""
    gone = subprocess.Popen(SLEEPER)
    watch = ProcessWatch()
    watch.track(1, identity_of(gone.pid), HOST)
    time.sleep(0.1)  # a later start time, in clock ticks
    gone.kill()
    gone.wait()
    if (later := _on_pid(gone.pid)) is None:
        pytest.skip("no process could be started on a given pid here")
    try:
        later.send_signal(signal.SIGSTOP)
        _until(later.pid, "T")
        assert watch.stopped(1) is None
    finally:
        later.kill()
        later.wait()


def _hello(h, rank: int, pid: int) -> None:
    head = {"op": "hello", "rank": rank, "host": HOST, **hello_fields({}), "run": rank}
    assert h.ask({**head, "process": identity_of(pid)})[0]["op"] == "ok"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stopped_rank_silent_past_the_timeout_is_said_stopped(hand, stopped, mode):
    h = hand(workers=2, mode=mode, on_worker_loss="fail", timeout=1.0)
    _hello(h, 0, os.getpid())  # rank 0 runs (this process), rank 1's process is stopped
    _hello(h, 1, stopped.pid)
    if mode == "sync":
        h.send({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None})
        h.shard.waiting["gather:barrier:2"].since -= 10
    else:
        h.shard.last_seen[1] -= 10
    h.shard._check_timeouts(time.monotonic())
    said = f"; its process (pid {stopped.pid}, on this host) {WORKER_STOPPED}; {RAISE_TIMEOUT}"
    assert h.shard.failed.startswith("rank 1 (host "), h.shard.failed
    assert h.shard.failed.endswith(said), h.shard.failed
    quoted = f"distconv train: error: rank 0, barrier:2: pserver 127.0.0.1:5: {h.shard.failed}"
    assert told_rank([quoted]) == 1  # still the straggler the launcher blames


def test_the_protocol_quotes_the_stopped_rank_and_the_way_out():
    """docs/protocol.md's "Timeouts and failures" says the words a shard ends a straggler's
    timeout with, as the shard says them: whether its process is stopped, then the way out."""
    docs = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text()
    part = docs.split("\n## Timeouts and failures\n", 1)[1].split("\n## ", 1)[0]
    said = " ".join(part.split())  # the page wraps its quotes
    assert f"`; its process (pid 4242, on this host) {WORKER_STOPPED}`" in said
    assert f"`; {RAISE_TIMEOUT}`" in said


def test_of_several_silent_ranks_the_stopped_one_is_named_and_none_blamed(hand, stopped):
    """Ranks 1 and 2 kept a gather waiting, rank 2's process stopped, rank 1's running: the
    words say whose process is stopped, and the launcher blames neither (several named)."""
    h = hand(workers=3, mode="sync", timeout=1.0)
    _hello(h, 0, os.getpid())
    _hello(h, 1, os.getpid())
    _hello(h, 2, stopped.pid)
    h.send({"op": "gather", "rank": 0, "tag": "barrier:2", "value": None})
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    said = f"; rank 2's process (pid {stopped.pid}, on this host) {WORKER_STOPPED}; {RAISE_TIMEOUT}"
    assert h.shard.failed.startswith("rank 1 (host "), h.shard.failed
    assert h.shard.failed.endswith(said) and "rank 1's process" not in h.shard.failed
    quoted = f"distconv train: error: rank 0, barrier:2: pserver 127.0.0.1:5: {h.shard.failed}"
    assert told_rank([quoted]) is None
