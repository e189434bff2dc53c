"""A shard that fails the job on a rank silent past its ``--timeout`` says where that rank's
process on its own host is stopped (SIGSTOP, Ctrl-Z, a debugger): ``its process (pid N, on this
host) is stopped (...)``, why it said nothing, before the way out. Its words named the rank and
the wait only, the same for a stopped rank as for a slow one. A real process, really stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distconv.rank_endings import RAISE_TIMEOUT
from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.processes import WORKER_STOPPED, ProcessWatch
from launcher.named_cause import told_rank
from tests.sync.ps.test_ps_processes import HOST, identity_of

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not Path("/proc/self/ns/pid").exists(), reason="needs Linux's /proc"),
]


@pytest.fixture
def stopped() -> Iterator[subprocess.Popen]:
    """A child process stopped by SIGSTOP (killed at the test's end, stopped or not)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        child.send_signal(signal.SIGSTOP)
        for _ in range(200):  # the stop takes effect asynchronously
            if Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T":
                break
            time.sleep(0.01)
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
