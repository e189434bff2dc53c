"""The launcher's own messages during a job (a stop, a restart, the failure report), as the
supervisor writes them.

They go to stderr, but where stderr is stdout's file (``2>&1`` into a pager, one terminal) a
write there waits on the reader of the children's lines as well: with that reader stalled, the
supervisor blocked for good on its next message, while its children, no longer held up by the
output, ran on with nothing to stop them (SIGTERM was noted, never acted on). There, the
messages go through the children's queue (:class:`launcher.terminal.Terminal`), after the lines
queued before them, and a stall drops them, counted, as it drops a child's line: the failure
report is in ``failure.json`` all the same.
"""

from __future__ import annotations

import os
import threading
from typing import BinaryIO

from .json_lines import JsonLines
from .terminal import Terminal


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
        self._terminal: Terminal | None = None

    def share(self, terminal: Terminal | None, out: BinaryIO) -> None:
        """From now on, the messages go through ``terminal`` where ``err`` is ``out``'s file
        (:func:`same_file`); None: straight to ``err`` again."""
        self._terminal = terminal if terminal is not None and same_file(out, self.err) else None

    def line(self, message: str, level: str = "info") -> bytes:
        """``message`` as the launcher's line: a JSON object of ``level`` under :attr:`lines`."""
        if self.lines is not None:
            return self.lines.message(message, self.restart, level)
        return f"distconv-launch: {message}\n".encode(errors="backslashreplace")

    def say(self, message: str, level: str = "info") -> None:
        """Write ``message``: through the shared queue where there is one that still takes
        lines (a stall drops it there, counted, never blocking for good), else on ``err``
        (dropped where that is gone: a closed terminal must not keep the children from their
        SIGTERM)."""
        line = self.line(message, level)
        terminal = self._terminal
        if terminal is not None and terminal.say(line):
            return
        with self._lock:
            try:
                self.err.write(line)
                self.err.flush()
            except OSError:
                pass
