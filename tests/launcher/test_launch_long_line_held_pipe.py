"""A child that dies inside a long line while a process that left its group (setsid, a daemon)
still holds its pipe: :meth:`launcher.child.Child.finish` stops waiting for the pump, which is
still inside the line. Its pieces so far were on the output and in the log, but the report's
tail had nothing of it (the tail took the line only at its end): it now has the line's
:func:`~launcher.kept_line.kept_line`. The bytes after the last whole piece (the ``c`` s below)
were in neither the tail, nor the log, nor the output (``readline`` held them, waiting for the
rest of the piece): the pump now passes them on, the line ended, as the launcher gives up."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

import launcher.child
from launcher.child import READ_PIECE, Child, ChildSpec
from launcher.kept_line import kept_line
from tests.launcher.real_children import stray_holding_the_pipe, wait_until

#: a stray leaves the group and keeps the pipe; then the leader prints two pieces and a bit of
#: a line and dies inside it
CHILD = stray_holding_the_pipe(
    f'os.write(1, b"a" * {READ_PIECE} + b"b" * {READ_PIECE} + b"c" * 10)'
)


@pytest.mark.timeout(30)
def test_a_line_cut_off_by_a_held_pipe_is_in_the_reports_tail(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.2)  # the product's 5 s
    pid_file = tmp_path / "stray.pid"
    spec = ChildSpec("worker", 0, [sys.executable, "-c", CHILD, str(pid_file)])
    out_path = tmp_path / "out"
    stray = None
    try:
        with open(out_path, "wb") as out:
            child = Child(spec, tmp_path / "w.log", out, threading.Lock())
            wait_until(lambda: pid_file.exists(), "the stray did not start")
            stray = int(pid_file.read_text())
            # both pieces on the output (the tail is set before each piece's output)
            wait_until(lambda: out_path.stat().st_size >= 2 * READ_PIECE + 23, "no second piece")
            wait_until(lambda: child.poll() is not None, "the child did not exit")
            child.finish()
        assert child.output_held is not None  # the pump was left inside the line
        report = child.failure(0)
        assert report.exit_code == 3
        line = b"a" * READ_PIECE + b"b" * READ_PIECE + b"c" * 10
        assert report.tail == [kept_line(line)]
        assert (tmp_path / "w.log").read_bytes() == line + b"\n"
        assert out_path.read_bytes().endswith(b"\n[worker 0]+ " + b"c" * 10 + b"\n")
    finally:  # (then the pump reads the rest, and ends)
        if stray is not None:
            os.kill(stray, signal.SIGKILL)


def test_the_docs_say_a_held_pipe_leaves_nothing_out():
    """The docs said the bytes after such a line's last whole piece, and a last line without a
    newline, are in neither the tail nor the log; they are now in both, and on the output."""
    docs = " ".join((Path(__file__).parents[2] / "docs" / "operations.md").read_text().split())
    assert "the line under way, ended with a newline, as far as the child wrote it" in docs
    assert "are in neither the tail nor the log" not in docs
