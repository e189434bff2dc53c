"""The pump's wake-up pipe (:class:`launcher.long_line.OutputPipe`) is closed on every path,
also where the launcher gave up on a child's pipe that a process outside its group held: it
stayed open for good once that process let go and the pump ended (two descriptors a held
attempt, which ``--max-restarts`` adds up)."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

import launcher.child
from launcher.child import Child, ChildSpec
from tests.launcher.real_children import stray_for_a_while

#: a stray leaves the group holding the pipe for a while; the child prints its last words
#: without a newline and dies
CHILD = stray_for_a_while(0.8, b"fatal: boom")


def _same_file(fd: int, stat: os.stat_result) -> bool:
    """Whether ``fd`` is still open on the file ``stat`` was of (not closed, nor reused)."""
    try:
        now = os.fstat(fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (stat.st_dev, stat.st_ino)


@pytest.mark.timeout(30)
def test_the_wake_up_pipe_is_closed_once_a_held_pipes_pump_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.2)  # the product's 5 s
    spec = ChildSpec("worker", 0, [sys.executable, "-c", CHILD])
    with open(tmp_path / "out", "wb") as out:
        child = Child(spec, tmp_path / "w.log", out, threading.Lock())
        wake = [child._output._wake, child._output._waker]
        stats = [os.fstat(fd) for fd in wake]
        deadline = time.monotonic() + 10
        while child.poll() is None and time.monotonic() < deadline:  # its stray out of reach
            time.sleep(0.01)
        child.finish()
        assert child.output_held is not None  # the stray held the pipe: given up on
        assert (tmp_path / "w.log").read_bytes() == b"fatal: boom\n"
        child._pump.join(10)  # the stray lets go: the pump reads the end
        assert not child._pump.is_alive()
    assert not any(_same_file(fd, stat) for fd, stat in zip(wake, stats))
