"""The launcher's last line on stderr, written within a bound (:func:`write_last`).

After a refusal or an interruption before any job ran, the launcher ends on one line. Printed
straight to a stderr that nobody reads (a full pipe: a paused pager on ``2>`` only, a reader
that died without closing it), the write blocked for good; a SIGTERM raised out of it, its
traceback blocked in turn, and it took a third SIGTERM to end the launcher. The line is not
worth a launcher that does not end: its exit status says the same.

argparse's own usage errors and help (:class:`BoundedParser`) come before the launcher arms its
stop signals, which keep a SIGTERM for later meanwhile: printed straight to a stalled stderr,
such a usage error blocked for good, and only SIGKILL ended the launcher. A stop signal kept
meanwhile ends the write at once, and the launcher with 128 + it, not argparse's status.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, NoReturn

from .interrupt import kept

#: seconds the last line may take to be written before the launcher gives it up
LAST_LINE_SECONDS = 1.0
#: seconds between looks for a stop signal kept meanwhile (:func:`launcher.interrupt.kept`)
KEPT_LOOK = 0.05


def write_last(text: str, patience: float = LAST_LINE_SECONDS) -> None:
    """Write ``text`` and a newline on stderr, giving up silently after ``patience`` seconds
    or at a stop signal meanwhile (the exit status still says why the launcher ended)
    (:func:`write_within`)."""
    write_within(f"{text}\n", sys.stderr, patience)


def write_within(text: str, stream: IO[str] | None, patience: float = LAST_LINE_SECONDS) -> None:
    """Write ``text`` on ``stream`` (stderr, stdout), giving up silently after ``patience``
    seconds or at a stop signal meanwhile.

    The write is a thread's, straight on the descriptor: a stalled one blocks that thread
    alone (a daemon, which the interpreter's exit leaves behind), and no lock of the
    stream's that a stalled writer of the launcher's messages may hold delays it."""
    if stream is None:  # closed (``2>&-``): nothing to say it on
        return
    data = text.encode(getattr(stream, "encoding", None) or "utf-8", errors="backslashreplace")
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):  # a stand-in (a test's capture): no stall
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):  # closed: dropped, as argparse drops it
            pass
        return
    writer = threading.Thread(target=write_whole, args=(fd, data), name="last line", daemon=True)
    writer.start()
    deadline = time.monotonic() + patience
    try:  # an armed stop signal raises; one kept before arming (a usage error) is looked for
        while writer.is_alive() and kept() is None and time.monotonic() < deadline:
            writer.join(min(KEPT_LOOK, max(0.0, deadline - time.monotonic())))
    except KeyboardInterrupt:  # a stop signal (launcher.interrupt): the line is given up
        pass


def quote_user_values(args: argparse.Namespace, rest: Sequence[str]) -> None:
    """Have the launcher's error lines show each value the user gave (its flags' in ``args``,
    the words after ``--`` in ``rest``) that breaks a line or holds another character that
    does not print as a shell's ``$'...'`` word, as ``distconv train``'s error lines do
    (:func:`distconv.messages.quote_in_errors`): squeezed onto one line, ``--hostfile
    $'no\\nfile'`` read ``--hostfile no file``, another path."""
    from distconv.messages import quote_in_errors

    quote_in_errors([*(v for v in vars(args).values() if isinstance(v, str)), *rest])


class BoundedParser(argparse.ArgumentParser):
    """An argument parser whose usage errors and help are written within a bound
    (:func:`write_within`): a usage error on a stalled stderr still ends the launcher, with
    2 (its subcommands' parsers are of this class too)."""

    def _print_message(self, message: str, file: IO[str] | None = None) -> None:
        if message:  # as argparse's own: stderr where no file is given
            write_within(message, file if file is not None else sys.stderr)

    def error(self, message: str) -> NoReturn:
        """argparse's usage error, its usage and its ``error:`` line in one write: as two,
        each a thread's, the second began while a stalled stderr still held the first, and
        whichever the reader took first came first (or the usage never, given up)."""
        self.exit(2, f"{self.format_usage()}{self.prog}: error: {message}\n")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        """argparse's exit, but with 128 + a stop signal that came meanwhile (kept, the
        launcher not armed yet: :func:`launcher.interrupt.kept`), as at any other moment
        before the job started: a usage error or help cut short by SIGTERM is a stop."""
        if message:
            self._print_message(message, sys.stderr)
        signum = kept()
        sys.exit(status if signum is None else 128 + signum)


def write_whole(fd: int, data: bytes) -> None:
    """``data`` on descriptor ``fd``, whole; an OS error (a closed or gone reader) drops it."""
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass


class BoundedHandler(logging.Handler):
    """A logging handler that writes each record on stderr within a bound
    (:func:`write_within`), as logging's last resort formats it (its message alone)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:  # noqa: BLE001 -- logging's own way with a record it cannot format
            self.handleError(record)
            return
        write_within(f"{text}\n", sys.stderr)


@contextmanager
def bounded_log(name: str) -> Iterator[None]:
    """Within it, logger ``name``'s records (a library's warning: ``distconv.cores``') go to
    stderr within a bound (:class:`BoundedHandler`) where logging is not set up, as in the
    launcher's own process: logging's last resort wrote them straight to a stderr that may
    stall, and the launcher blocked there for good. Where handlers are set up (the launcher
    called as a function), they are left to it."""
    logger = logging.getLogger(name)
    if logger.hasHandlers():
        yield
        return
    handler = BoundedHandler(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
