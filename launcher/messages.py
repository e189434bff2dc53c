"""The launcher's own messages during a job (a stop, a restart, the failure report), as the
supervisor writes them.

They go to stderr, and a write there waits on its reader: with that reader stalled (a paused
pager, a reader that died without closing the pipe), the supervisor blocked for good on its next
message, while its children ran on with nothing to stop them (SIGTERM was noted, never acted
on). So during a job the messages go through a bounded queue that a stall drops from, counted,
as it drops a child's line (:class:`launcher.terminal.Terminal`): the children's own where
stderr is stdout's file (``2>&1`` into a pager, one terminal), after the lines queued before
them; else one of their own on stderr, written by a thread of its own. The failure report is
in ``failure.json`` all the same.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import BinaryIO

from .json_lines import JsonLines
from .shown import unbroken
from .stderr_line import write_whole
from .terminal import Terminal

#: bytes of the launcher's messages queued at most on a stderr of their own that stalls
MESSAGE_BYTES = 256 * 1024
#: seconds a second stop signal leaves the launcher's stderr to take what is queued (a stderr
#: that takes it at once loses none of it), then the line saying what of its messages it
#: dropped (the piece under way first): the launcher ends promptly all the same
LEFT_SAID_SECONDS = 0.2
#: seconds a message written straight on stderr (after the end) may take before it is given
#: up, and every later one dropped
STRAIGHT_SECONDS = 1.0


def same_file(one: BinaryIO, other: BinaryIO) -> bool:
    """Whether ``one`` and ``other`` write to the same file (one object, or descriptors of
    one device and inode: ``2>&1``, a terminal for both); False where either has no
    descriptor (a test's buffer)."""
    if one is other:
        return True
    try:
        first, second = os.fstat(one.fileno()), os.fstat(other.fileno())
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is both
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


class Messages:
    """The launcher's messages, written whole, each on its own line.

    Args:
        err: where they go (the launcher's stderr).
        lines: writes each as a JSON object (``--log-format json``); None: as text behind
            ``distconv-launch:``.
    """

    def __init__(self, err: BinaryIO, lines: JsonLines | None) -> None:
        self.err, self.lines = err, lines
        #: the attempt running, for the JSON objects (None before the first)
        self.restart: int | None = None
        self._lock = threading.Lock()  # apart from the children's: a stalled stdout blocks none
        self._terminal: Terminal | None = None  # the queue the messages go through, if any
        self._own = False  # that queue is theirs alone (``err`` is not stdout's file)
        self._stuck: threading.Thread | None = None  # the last straight write (_straight)
        self._ended: Terminal | None = None  # the queue :meth:`end` ended: not again

    def begin(self) -> None:
        """From now on (a launch's run directory held), the messages go through a queue of
        their own on ``err``, written by a thread (:meth:`end` closes it): never straight to a
        stderr that may stall, before the job's start as well."""
        if not self._own:
            notice = partial(self.line, level="warning")
            self._terminal, self._own = Terminal(self.err, notice, MESSAGE_BYTES), True

    def share(self, terminal: Terminal, out: BinaryIO, patience: float) -> None:
        """From now on (a job's run), where ``err`` is ``out``'s file (:func:`same_file`), the
        messages go through ``terminal``, after what their own queue holds (:meth:`end`: one
        writer at a time, in order); else through their own (:meth:`begin`)."""
        if not same_file(out, self.err):
            self.begin()
            return
        self._close_own(patience)
        self._terminal = terminal

    def _close_own(self, patience: float, stop: Callable[[], bool] | None = None) -> None:
        """Close the queue of their own, if they have one (:meth:`end`)."""
        if self._own and self._terminal is not None:
            self._own = False
            self._terminal.close(patience, stall_ends=True, stop=stop)

    def end(self, patience: float, stop: Callable[[], bool] | None = None) -> None:
        """The messages queued on a queue of their own written, within ``patience`` seconds,
        or till a stall (the launcher must end), or till ``stop()`` holds (a second stop
        signal: then what the output does not take within :data:`LEFT_SAID_SECONDS` is
        dropped, said on a line of its own where the output takes it within as long again:
        :meth:`Terminal.leave`); where they share the children's queue (:meth:`share`), a
        second stop signal leaves that queue as long to take them, then drops and counts the
        rest as on a stderr of its own; so does an output too slow for ``patience`` (a first
        stop signal, or none), its count said within as long. A message from now on goes
        straight to ``err``, but while that queue's writer is under way (a stalled stderr):
        through it, which blocks none. Once a queue is ended, a later call (``unclaim()``'s,
        after :meth:`Supervisor.run`'s) leaves it be: it waited as long again on an output that
        stayed slow, and its :meth:`Terminal.leave` counted the dropped messages anew, from the
        queue the first had emptied, so that the count line said none."""
        terminal = self._terminal
        if terminal is None or terminal is self._ended:
            return
        self._ended = terminal
        self._close_own(patience, stop)
        # a stderr that takes them at once gets them all the same: the last words, queued
        # just before, were once dropped at a second Ctrl-C on a terminal; where shared with
        # the children's lines (2>&1), their view's close gave up at once, its writer not yet
        # at them; what a slow output does not take is counted there too (the launcher once
        # ended with them queued, unsaid, a long line cut); at a first stop signal, or none,
        # an output too slow for the wait above (or the shared view's close in
        # Supervisor._end_output) lost the rest unsaid: counted as well
        left, second = LEFT_SAID_SECONDS, stop is not None and stop()
        if not terminal.written(left):
            terminal.leave(left, "at a second stop signal" if second else "at the launcher's end")

    def line(
        self,
        message: str,
        level: str = "info",
        more: Sequence[str] = (),
        paths: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> bytes:
        """``message`` as the launcher's line, each on one line whatever the values in it
        hold (:func:`~launcher.shown.unbroken`), then the lines ``more`` (a failure report's
        tail, its file), each on one line too; one JSON object of ``level`` under
        :attr:`lines`, its message them all, a line each, and each of ``paths`` (those the
        text quotes) a key of its own (:data:`launcher.json_lines.PATH_FIELDS`)."""
        if self.lines is not None:
            text = "\n".join([message, *more])
            return self.lines.message(text, self.restart, level, paths)
        said = "".join(f"{unbroken(each)}\n" for each in [f"distconv-launch: {message}", *more])
        return said.encode(errors="backslashreplace")

    def say(
        self,
        message: str,
        level: str = "info",
        report: Path | None = None,
        more: Sequence[str] = (),
        paths: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> None:
        """Write ``message``: through the queue (:meth:`share`) where there is one that still
        takes lines (a stall drops it there, counted, never blocking for good), else on ``err``
        (dropped where that is gone: a closed terminal must not keep the children from their
        SIGTERM). ``report``: the file that holds the failure report ``message`` says, which
        the notice of dropped messages names, and the JSON line's ``report``; ``more``: its
        lines after the first; ``paths``: the others it names (:meth:`line`)."""
        named = {**(paths or {}), **({"report": report} if report is not None else {})}
        line = self.line(message, level, more, named)
        terminal = self._terminal
        if terminal is not None and terminal.say(line, report):
            return
        with self._lock:
            self._straight(line)

    def _straight(self, line: bytes) -> None:
        """``line`` straight on ``err`` (under the lock), within :data:`STRAIGHT_SECONDS`:
        after the end (its queue's writer done) a blocking write there held the launcher for
        good where the output stalled then (a full pipe, a paused pager: the end's own lines,
        :meth:`Supervisor._end_output`). The write is a thread's, on the descriptor (not
        ``err``'s buffer, whose lock a stalled writer holds), and once one is left stalled
        every later line is dropped: one thread left at most, none waited for again."""
        if self._stuck is not None and self._stuck.is_alive():
            return
        try:
            fd = self.err.fileno()
        except (OSError, ValueError, AttributeError):  # a stand-in (a test's buffer): no stall
            try:
                self.err.write(line)
                self.err.flush()
            except (OSError, ValueError):  # gone, or closed: dropped, as said above
                pass
            return
        writer = threading.Thread(target=write_whole, args=(fd, line), name="message", daemon=True)
        writer.start()
        writer.join(STRAIGHT_SECONDS)
        self._stuck = writer
