"""The launcher's wait for a late pump's answer (``OutputPipe.end_line``, where a process
that left the child's group holds its pipe) is bounded where the launcher's own output moves,
but slowly (a reader that takes a line at a time): each write then took under a wait's length,
so the launcher went on waiting, a wait at a time, until the pump had written every line it
held, however long that took (a pipe's 64 KiB of short lines at 100 bytes a second: 11
minutes). Such a pump is held up by the output, not run late by the host."""

from __future__ import annotations

import sys
import threading
import time

import pytest

import launcher.child
from launcher.child import Child, ChildSpec
from tests.launcher.real_children import RecordingOutput, stray_for_a_while, wait_until

#: lines the child prints at once before its last words; one a write of the slow output
LINES = 1000
#: seconds each write of the slow output takes, until the test lets it move
WRITE_SECONDS = 0.01


class SlowOutput(RecordingOutput):
    """The launcher's output, taking :data:`WRITE_SECONDS` a write until :attr:`fast` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.fast = threading.Event()

    def hold(self, data: bytes) -> None:
        self.fast.wait(WRITE_SECONDS)


@pytest.mark.timeout(60)
def test_a_pump_held_up_by_a_slow_output_is_not_waited_for_line_by_line(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.05)  # the product's 5 s
    printed = b"".join(b"line %d\n" % n for n in range(LINES)) + b"fatal: boom"
    spec = ChildSpec("worker", 0, [sys.executable, "-c", stray_for_a_while(1.0, printed)])
    out = SlowOutput()
    child = Child(spec, tmp_path / "worker-0.log", out, threading.Lock())
    try:
        wait_until(lambda: child.poll() is not None, "the child did not exit")
        started = time.monotonic()
        child.finish()
        took = time.monotonic() - started
    finally:
        out.fast.set()
        child._pump.join(10)  # the stray lets go after 1 s: the pump reads the end
    assert took < LINES * WRITE_SECONDS / 4, took  # was LINES * WRITE_SECONDS and more
    assert child.output_held is not None and "still holds its output" in child.output_held
    assert child.log_path.read_bytes() == printed + b"\n"  # nothing lost, only not waited for
    assert b"".join(out.written).endswith(b"[worker 0] fatal: boom\n")


@pytest.mark.timeout(60)
def test_a_slow_output_with_no_stray_is_named_not_blamed_on_one(tmp_path, monkeypatch):
    """The same slow output, no process holding the child's pipe: the launcher stopped waiting
    for the pump, and said that "a process that left its process group ... still holds its
    output", where none was; it now says that the output is passed on slowly."""
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.05)  # the product's 5 s
    printed = b"".join(b"line %d\n" % n for n in range(LINES)) + b"fatal: boom"
    program = f"import os; os.write(1, {printed!r}); os._exit(3)"
    out = SlowOutput()
    child = Child(
        ChildSpec("worker", 0, [sys.executable, "-c", program]),
        tmp_path / "w.log",
        out,
        threading.Lock(),
    )
    try:
        wait_until(lambda: child.poll() is not None, "the child did not exit")
        child.finish()
    finally:
        out.fast.set()
        child._pump.join(10)
    assert child.output_held == (
        f"worker-0: its output is passed on slowly (a slow reader of the launcher's output, a "
        f"slow file system for '{tmp_path / 'w.log'}', a loaded host), so worker-0's last lines "
        f"are missing from failure.json; '{tmp_path / 'w.log'}' gets them all (drained there at "
        "the launcher's end), its output those it takes before that end"
    )  # was "worker-0: a process that left its process group (setsid, a daemon) still ..."
    # then "...; they still reach the output and the log": not the output's last
    assert child.log_path.read_bytes() == printed + b"\n"
    assert b"".join(out.written).endswith(b"[worker 0] fatal: boom\n")
