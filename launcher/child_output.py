"""The output pump of :class:`~launcher.child.Child`: each line of the child's pipe to its log,
its tail and the launcher's output.

:class:`ChildOutput` is a mixin of :class:`~launcher.child.Child`: its pump thread runs
:meth:`ChildOutput._copy`, which writes each whole line, prefixed, to the launcher's output
(:meth:`ChildOutput._write`) and, bare, to the child's log, a line over :data:`READ_PIECE` a
piece at a time, never held whole (:meth:`ChildOutput._copy_long`). It uses the child's spec,
log writes, output pipe, waits and tail, and its :meth:`~launcher.child.Child._note_end`;
:meth:`ChildOutput.output_read` waits for the pump's end (its pipe files').
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from typing import BinaryIO

from .kept_line import kept_line
from .long_line import READ_PIECE, LongLine
from .output_waits import WRITE_PIECE
from .terminal import Terminal


class ChildOutput:
    """Copy a child's output lines to its log, its tail and the launcher's output."""

    def output_read(self, deadline: float) -> bool:
        """Whether the pump has read the child's output to its end, so that its tail holds
        every line the child wrote, waiting for that until ``deadline`` (monotonic) at most:
        the waiter may see the child's exit while its last lines are still in the pipe (the
        pump writing an earlier one to the launcher's output). False past the deadline: a
        process outside the child's group holds the pipe, or the pump is held up."""
        return self._files.pump_ended.wait(max(deadline - time.monotonic(), 0.0))

    def _copy(
        self, out: BinaryIO, lock: threading.Lock, render: Callable[[bytes], bytes] | None
    ) -> None:
        assert self._output is not None  # made before the pump starts
        prefix, pieces = self.spec.line_prefix, self._output.pieces()
        read = partial(next, pieces, b"")  # b"" at the pipe's end
        echo = to_log = True
        for line in pieces:
            if not line.endswith(b"\n"):
                if len(line) == READ_PIECE:  # a longer line (else the last, cut by the end)
                    echo, to_log = self._copy_long(line, read, out, lock, render, echo, to_log)
                    continue
                line += b"\n"
            if to_log:
                to_log = self._log_writes.write(line)
            text = kept_line(line)  # bounded: the tail keeps up to 1,024 of them, three times
            self.tail.append(text)
            self._note_end(text)
            if not echo or (self.spec.quiet is not None and self.spec.quiet(text)):
                continue
            shown = prefix + line if render is None else render(line)
            echo = self._write(out, lock, shown)  # False: keep draining into the log

    def _copy_long(
        self,
        piece: bytes,
        read: Callable[[], bytes],
        out: BinaryIO,
        lock: threading.Lock,
        render: Callable[[bytes], bytes] | None,
        echo: bool,
        to_log: bool,
    ) -> tuple[bool, bool]:
        """A line over :data:`READ_PIECE` from ``piece``, its first (:mod:`launcher.long_line`):
        each piece to the log as read, and to the output as a line of its own under the lock for
        it alone; the tail keeps its :func:`kept_line` (of the pieces so far, while they come).
        Quiet or not by its first piece; under ``render`` the output gets the tail's form (JSON
        lines need the whole line). Returns ``echo``, ``to_log`` as left."""
        line = LongLine(self.spec.line_prefix, self.spec.role)
        shown = echo and (self.spec.quiet is None or not self.spec.quiet(kept_line(piece)))
        streamed, in_tail = shown and render is None, False
        while True:
            if to_log:
                to_log = self._log_writes.write(piece)
            output = line.add(piece)
            text = line.kept.text()  # in the tail so far: finish() may leave the pump mid-line
            if in_tail:
                self.tail[-1] = text
            else:
                self.tail.append(text)
                in_tail = True
            if streamed and output:
                streamed = echo = self._write(out, lock, output, line.continued)
            if piece.endswith(b"\n"):
                break
            piece = read() or b"\n"  # the end of the output: its newline, as above
        self._note_end(text)
        if shown and echo and render is not None:
            echo = self._write(out, lock, render(text.encode() + b"\n"))
        return echo, to_log

    def _write(self, out: BinaryIO, lock: threading.Lock, shown: bytes, cont: bool = False) -> bool:
        """One whole line on ``out`` under ``lock`` (prefixes never split a line), or queued
        on it, a :class:`Terminal` (the supervisor's: a stall drops lines, counted, after
        1 s; ``cont``: a later piece of a long line, counted with it); False where ``out`` is
        gone (``| head``) or closed. While it waits (a reader of the launcher's output, as a
        paused pager), nothing reads the child's pipe, which fills and blocks the child: that
        time is not the child's own in its wrap-up (:meth:`overdue`), each
        :data:`WRITE_PIECE` bytes a wait of its own (a long line is not a stall)."""
        counted, waits = self.reported_end is not None, self._waits
        start = waits.begin()  # for the lock: another pump's write holds it
        try:
            if isinstance(out, Terminal):  # a wait a piece written; a stall drops, counted
                moved = partial(waits.moved, counted)
                return out.put(self.spec.name, self.log_path, shown, moved, continued=cont)
            with lock:
                for at in range(0, len(shown), WRITE_PIECE):
                    waits.end(start, counted)  # the wait before: the lock's, or a piece's
                    start = waits.begin()
                    out.write(shown[at : at + WRITE_PIECE])
                    out.flush()
        except (OSError, ValueError):
            return False
        finally:
            waits.end(waits.since or start, counted)  # since: a later piece's, or start
        return True
