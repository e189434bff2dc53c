"""The pump's write of a short line (almost every line of a launch) costs what it did before
lines went in :data:`launcher.output_waits.WRITE_PIECE` pieces: two notes of a wait (for the
lock, then for the write), nothing more. Each piece's wait went through a generator-based
context manager, which nearly doubled the launcher's CPU per line (0.46 s to 0.83 s for 200,000
lines of a child)."""

from __future__ import annotations

import io
import sys
import threading
import types

import pytest

from launcher.child import Child
from launcher.output_waits import WRITE_PIECE, OutputWaits


def _python_calls(run) -> list[str]:
    """The Python functions that :meth:`Child._write`, called by ``run()``, calls (not C's),
    by name, in order."""
    calls: list[str] = []

    def profile(frame, event, _arg):
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls[calls.index("_write") + 1 :]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("counted", [False, True], ids=["running", "after-its-report"])
def test_a_short_line_is_written_with_two_notes_of_a_wait_and_no_more(counted):
    pump = types.SimpleNamespace(_waits=OutputWaits(), reported_end=(0.0, "") if counted else None)
    out, line = io.BytesIO(), b"[worker-0] step 3 loss 0.25\n"
    calls = _python_calls(lambda: Child._write(pump, out, threading.Lock(), line))
    assert calls == ["begin", "end", "begin", "end"], calls
    assert out.getvalue() == line and pump._waits.since is None


@pytest.mark.timeout(30)
def test_a_long_line_is_written_whole_a_wait_for_each_piece():
    waits = OutputWaits()
    pump = types.SimpleNamespace(_waits=waits, reported_end=(0.0, ""))
    out, line = io.BytesIO(), bytes(range(256)) * (3 * WRITE_PIECE // 256) + b"!\n"
    calls = _python_calls(lambda: Child._write(pump, out, threading.Lock(), line))
    assert calls == ["begin", "end"] * 5, calls  # the lock's wait, then 4 pieces
    assert out.getvalue() == line and waits.since is None
