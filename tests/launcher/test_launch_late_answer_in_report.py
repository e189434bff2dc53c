"""A child's last words, printed without a newline as it dies while a process that left its
group holds its pipe, are in the report's tail (``failure.json``) also where the pump, told to
pass them on (``OutputPipe.end_line``), answers after :data:`~launcher.child.OUTPUT_DRAIN_SECONDS`
(a host that runs the pump late): the launcher stopped waiting then, built the report without
them, and the pump put them in the log only later. It now waits on while the pump is inside no
write (of the launcher's output, of the log) that outlasts a wait: such a pump answers.
Here the pump's answer is held until the launcher has waited twice for it."""

from __future__ import annotations

import sys

import pytest

import launcher.child
from launcher.child import ChildSpec
from launcher.long_line import OutputPipe
from tests.launcher.real_children import (
    after_unanswered_waits,
    log_write_hung,
    run_to_exit,
    stray_for_a_while,
)

#: a stray holds the pipe for a while; the child prints a line and its last words, and dies
CHILD = stray_for_a_while(1.0, b"step 1\nfatal: boom")


@pytest.fixture
def late_answer(monkeypatch):
    """The pump's answer to ``end_line`` held until the launcher's second wait for it ends
    without one (or the test lets it go): the first is all that the launcher waited before."""
    go, read = after_unanswered_waits(monkeypatch, 2), OutputPipe._read

    def late_read(self):
        chunk = read(self)
        if chunk is None:  # end_line's ask: answered once the line is passed on
            assert go.wait(10), "the launcher stopped waiting"
        return chunk

    monkeypatch.setattr(OutputPipe, "_read", late_read)
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.05)  # the product's 5 s
    yield go
    go.set()


@pytest.mark.timeout(30)
def test_last_words_that_the_pump_passes_on_late_are_in_the_report(tmp_path, late_answer):
    spec = ChildSpec("worker", 0, [sys.executable, "-c", CHILD])
    child = run_to_exit(tmp_path, spec)
    try:
        assert child.output_held is not None  # the stray held the pipe: given up on
        assert child.failure(0).tail == ["step 1", "fatal: boom"]  # was ["step 1"]
    finally:
        late_answer.set()
        child._pump.join(10)  # the stray lets go: the pump reads the end
    assert child.log_path.read_bytes() == b"step 1\nfatal: boom\n"


@pytest.mark.timeout(30)
def test_a_pump_held_in_a_log_write_is_not_waited_for(tmp_path, monkeypatch):
    """The wait on is bounded: a log that blocks (a hung network file system) on the last
    words holds the pump up for good, and the launcher gives up on it after two waits."""
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.05)
    with log_write_hung(monkeypatch, b"fatal"):
        child = run_to_exit(tmp_path, ChildSpec("worker", 0, [sys.executable, "-c", CHILD]))
        assert child.output_held is not None
    child._pump.join(10)
    assert child.log_path.read_bytes() == b"step 1\nfatal: boom\n"
