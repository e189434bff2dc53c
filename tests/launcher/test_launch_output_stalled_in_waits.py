"""A write to the launcher's output that begins while the launcher waits for the pump's answer
to ``OutputPipe.end_line`` (the pump run late, then held up) and does not end is named as the
output stalled. The launcher stopped waiting for it, rightly, but judged "under way" from the
moment it asked, so such a write was not seen: with no process holding the child's pipe, it
said that the output "is passed on slowly ... they still reach the output and the log", which
a stalled write never does (a log write: test_launch_hung_log_named)."""

from __future__ import annotations

import sys
import threading

import pytest

import launcher.child
from launcher.child import Child, ChildSpec
from tests.launcher.real_children import (
    RecordingOutput,
    reading_after_unanswered_waits,
    wait_until,
)

#: a child with no stray: it prints a line and its last words, and dies
CHILD = "import os; os.write(1, b'step 1\\nfatal: boom'); os._exit(3)"
SPEC = ChildSpec("worker", 0, [sys.executable, "-c", CHILD])


class StalledOutput(RecordingOutput):
    """The launcher's output, whose write of the child's first line does not end until
    :attr:`moves` is set (a pager left paused)."""

    def __init__(self) -> None:
        super().__init__()
        self.moves = threading.Event()

    def hold(self, data: bytes) -> None:
        if data.startswith(b"[worker 0] step"):
            assert self.moves.wait(10), "the launcher waited for a stalled output"


@pytest.mark.timeout(30)
def test_an_output_write_begun_during_the_waits_that_stalls_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.05)  # the product's 5 s
    reading_after_unanswered_waits(monkeypatch, 1)  # it writes once the first wait ran out
    out = StalledOutput()
    child = Child(SPEC, tmp_path / "w.log", out, threading.Lock())
    try:
        wait_until(lambda: child.poll() is not None, "the child did not exit")
        child.finish()
        said = child.output_held
    finally:
        out.moves.set()
        child._pump.join(10)
    assert said == (
        "worker-0: the launcher's output holds up its lines (read slowly, or not at all), so "
        f"worker-0's last lines are missing from failure.json; '{child.log_path}' gets them all "
        "(drained there at the launcher's end), its output those it takes before a 1 s stall "
        "or that end"
    )  # was "worker-0: its output is passed on slowly (...); they still reach the output ..."
    # then "... those still in worker-0's pipe at its end reach neither", which the
    # drain at the launcher's end made untrue
    assert out.written == [b"[worker 0] step 1\n", b"[worker 0] fatal: boom\n"]
    # the log has every line as the output moves: it said the log lacked them
    assert child.log_path.read_bytes() == b"step 1\nfatal: boom\n"
