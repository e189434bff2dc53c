"""Where the launcher gives up on a child's pipe, it told a stray that holds the pipe from its
own stalled output by whether the pump was inside a write to that output at that moment: a
pump that was merely passing on the stray's latest line (a write of an output that moves) was
taken for stalled. Then the launcher did not pass on the line under way
(:meth:`launcher.long_line.OutputPipe.end_line`), and said that nothing reads its output, so
the lines are missing from the log too, which was wrong. A stall is now a write under way since
before the launcher began to wait (or, for the message, since before it asked for the line)."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time

import pytest

import launcher.child
from launcher.child import Child, ChildSpec

#: the stray leaves the group; once the child is gone it prints a line (which the output below
#: takes 0.6 s to write), then the start of another, and holds the pipe
CHILD = """if True:
    import os, sys, time
    parent = os.getpid()
    stray = os.fork()
    if stray == 0:
        os.setsid()
        while os.getppid() == parent:
            time.sleep(0.005)
        time.sleep(0.3)
        os.write(1, b"slow line\\nunder way")
        time.sleep(20)
        os._exit(0)
    with open(sys.argv[1], "w") as named:  # for the test to end it, whatever happens
        named.write(str(stray))
    while os.getsid(stray) == os.getsid(0):
        time.sleep(0.001)
    os._exit(3)
"""


class SlowOutput(io.BytesIO):
    """A launcher output that moves, but takes 0.6 s over the stray's first line."""

    def write(self, data) -> int:  # type: ignore[override]
        if b"slow line" in data:
            time.sleep(0.6)
        return super().write(data)


@pytest.mark.timeout(30)
def test_a_stray_is_named_though_the_pump_was_writing_its_line_when_the_launcher_gave_up(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.6)  # the product's 5 s
    stray_pid = tmp_path / "stray.pid"
    spec = ChildSpec("worker", 0, [sys.executable, "-c", CHILD, str(stray_pid)])
    out = SlowOutput()
    child = Child(spec, tmp_path / "w.log", out, threading.Lock())
    try:
        deadline = time.monotonic() + 10
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        child.finish()  # at 0.6 s the pump is inside the 0.3 s line's write, till 0.9 s
        assert child.output_held is not None
        assert "still holds its output" in child.output_held, child.output_held
        assert (tmp_path / "w.log").read_bytes().endswith(b"slow line\nunder way\n")
    finally:  # the stray outlives no test, though the child said nothing or failed first
        if stray_pid.exists() and stray_pid.read_text():
            try:
                os.kill(int(stray_pid.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
