"""The launcher's last line on stderr, written within a bound (:func:`write_last`).

After a refusal or an interruption before any job ran, the launcher ends on one line. Printed
straight to a stderr that nobody reads (a full pipe: a paused pager on ``2>`` only, a reader
that died without closing it), the write blocked for good; a SIGTERM raised out of it, its
traceback blocked in turn, and it took a third SIGTERM to end the launcher. The line is not
worth a launcher that does not end: its exit status says the same.
"""

from __future__ import annotations

import os
import sys
import threading

#: seconds the last line may take to be written before the launcher gives it up
LAST_LINE_SECONDS = 1.0


def write_last(text: str, patience: float = LAST_LINE_SECONDS) -> None:
    """Write ``text`` and a newline on stderr, giving up silently after ``patience`` seconds
    or at a stop signal meanwhile (the exit status still says why the launcher ended).

    The write is a thread's, straight on the descriptor: a stalled one blocks that thread
    alone (a daemon, which the interpreter's exit leaves behind), and no lock of
    ``sys.stderr``'s that a stalled writer of the launcher's messages may hold delays it."""
    err = sys.stderr
    if err is None:  # closed (``2>&-``): nothing to say it on
        return
    data = f"{text}\n".encode(err.encoding or "utf-8", errors="backslashreplace")
    try:
        fd = err.fileno()
    except (OSError, ValueError, AttributeError):  # a stand-in (a test's capture): no stall
        err.write(f"{text}\n")
        err.flush()
        return
    writer = threading.Thread(target=_write_all, args=(fd, data), name="last line", daemon=True)
    writer.start()
    try:
        writer.join(patience)
    except KeyboardInterrupt:  # a stop signal (launcher.interrupt): the line is given up
        pass


def _write_all(fd: int, data: bytes) -> None:
    """``data`` on descriptor ``fd``, whole; an OS error (a closed or gone reader) drops it."""
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass
