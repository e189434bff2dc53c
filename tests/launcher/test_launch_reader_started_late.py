"""A child's output reader (the pump) that the host runs late, after the launcher's
:meth:`~launcher.child.Child.finish` has stopped waiting for it (a loaded host starves a thread
for :data:`~launcher.child.OUTPUT_DRAIN_SECONDS`), still reads all that the child wrote: it
was taken for a pipe a stray process holds, the pipe let go (``OutputPipe.close``) before the
pump read a byte, and the pump then read nothing, losing the child's lines from the log, the
report's tail and the launcher's output. Here the pump is held at its start until the launcher
lets go of the pipe or waits for the pump to read, whichever it does first."""

from __future__ import annotations

import sys
import threading

import pytest

import launcher.child
from launcher.child import ChildSpec
from launcher.long_line import OutputPipe
from tests.launcher.real_children import OUTPUT_NAME, run_to_exit

#: what the child writes before it dies: two lines and its last words, without a newline
WRITTEN = b"step 1\nstep 2\nfatal: boom"


@pytest.fixture
def late_reader(monkeypatch):
    """The pump's reading held back until the launcher lets go of the pipe (``close``) or
    waits for the pump to read (``await_reader``; no such wait before the fix)."""
    go = threading.Event()
    pieces, close = OutputPipe.pieces, OutputPipe.close
    waited = getattr(OutputPipe, "await_reader", None)

    def held_pieces(self):
        assert go.wait(10), "the launcher neither let go nor waited"
        yield from pieces(self)

    def let_go(self):
        close(self)
        go.set()  # after: the pump starts once the pipe is let go

    def await_reader(self, alive):
        go.set()
        waited(self, alive)

    monkeypatch.setattr(OutputPipe, "pieces", held_pieces)
    monkeypatch.setattr(OutputPipe, "close", let_go)
    monkeypatch.setattr(OutputPipe, "await_reader", await_reader, raising=False)
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.05)  # the product's 5 s


@pytest.mark.timeout(30)
def test_a_reader_started_after_the_launcher_gave_up_waiting_reads_it_all(tmp_path, late_reader):
    code = f"import sys; sys.stdout.buffer.write({WRITTEN!r}); sys.exit(3)"
    child = run_to_exit(tmp_path, ChildSpec("worker", 0, [sys.executable, "-c", code]))
    child._pump.join(10)
    assert child.log_path.read_bytes() == WRITTEN + b"\n"  # was b""
    assert list(child.tail) == ["step 1", "step 2", "fatal: boom"]
    shown = (tmp_path / OUTPUT_NAME).read_bytes()
    assert shown == b"[worker 0] step 1\n[worker 0] step 2\n[worker 0] fatal: boom\n"
    assert child.output_held is None  # no process holds its pipe: was said to
    assert child.failure(0).tail == ["step 1", "step 2", "fatal: boom"]
