"""A pump that has begun reading and is then not run for a while (a loaded host), where no
process holds the child's pipe any more: the launcher's wait for the pipe's end ran out, it
asked the pump for the line under way and got it, and yet it said that "a process that left
its process group ... still holds its output" where none did, and stopped
waiting for a pump that was about to end. It now sees that nothing holds the pipe
(:meth:`OutputPipe.unheld`) and waits for that end."""

from __future__ import annotations

import os
import sys

import pytest

import launcher.child
from launcher.child import ChildSpec
from launcher.long_line import OutputPipe
from tests.launcher.real_children import reading_after_unanswered_waits, run_to_exit

#: a child with no stray: it prints a line and its last words, and dies
CHILD = "import os; os.write(1, b'step 1\\nfatal: boom'); os._exit(3)"


@pytest.mark.timeout(30)
def test_a_reader_run_late_with_nothing_holding_the_pipe_is_waited_for(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.05)  # the product's 5 s
    reading_after_unanswered_waits(monkeypatch, 1)  # until the launcher asked in vain
    child = run_to_exit(tmp_path, ChildSpec("worker", 0, [sys.executable, "-c", CHILD]))
    assert child.output_held is None  # was "... a process that left its process group ..."
    assert not child._pump.is_alive()
    assert child.failure(0).tail == ["step 1", "fatal: boom"]
    assert child.log_path.read_bytes() == b"step 1\nfatal: boom\n"


def test_a_pipe_is_unheld_once_no_process_holds_its_write_end():
    read_end, write_end = os.pipe()
    pipe = OutputPipe(read_end)
    try:
        os.write(write_end, b"unread")
        assert not pipe.unheld()  # a writer (a stray) could still add to it
        os.close(write_end)
        assert pipe.unheld()  # even with bytes unread
    finally:
        pipe.close()
        os.close(read_end)
