"""A child's line over :data:`READ_PIECE`, read and passed on a piece at a time, never held
whole (:meth:`launcher.child.Child._copy_long` copies it): each piece is a line of its own on
the launcher's output, cut between UTF-8 characters (:func:`split_chars`), the later ones behind
:func:`continued_prefix`; the report's tail keeps its :func:`~launcher.kept_line.kept_line`
(:class:`~launcher.kept_line.KeptEnds`). :class:`OutputPipe` reads the child's pipe into such
lines and pieces."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import termios
import threading
import time
from collections.abc import Callable, Iterator

from .kept_line import KeptEnds
from .output_waits import STOP_LOOK

#: bytes of a line the pump reads at once: a longer one (an array of gigabytes) goes in pieces
READ_PIECE = 1 << 20
#: bytes the pump asks of the pipe at once (a pipe holds 64 KiB)
_READ_CHUNK = 1 << 16


def continued_prefix(prefix: bytes, role: str) -> bytes:
    """The launcher's output's prefix of the pieces after the first of a line over
    :data:`READ_PIECE`: ``prefix`` with a ``+`` before its space (``[worker 0]+ ``), telling a
    piece of the child's last line from a line of its own. Where ``prefix`` is empty (mpiexec's)
    the ``role`` is named, ``[mpiexec]+ ``: a bare ``+ `` is how a rank's own lines may begin
    (a ``set -x`` trace), and could not be told from a piece."""
    bare = prefix.rstrip() or f"[{role}]".encode()
    return bare + b"+" + (prefix[len(prefix.rstrip()) :] or b" ")


def split_chars(data: bytes) -> tuple[bytes, bytes]:
    """``data`` as what ends on a whole UTF-8 character and the start of one that it cuts at
    its end (up to 3 bytes, held for the next piece of the line): ``data`` and ``b""`` where
    it ends on one, is not UTF-8 there, or is that start alone."""
    for back in range(1, min(4, len(data) - 1) + 1):
        byte = data[-back]
        if byte < 0x80 or byte > 0xF4:  # ASCII, or no UTF-8: nothing to hold
            break
        if byte >= 0xC2:  # the character's first byte: whole if its length fits
            size = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return (data[:-back], data[-back:]) if size > back else (data, b"")
    return data, b""


class LongLine:
    """One line over :data:`READ_PIECE`, given a piece at a time (:meth:`add`): what the
    report's tail keeps of it so far (:attr:`kept`) and each piece's line on the output."""

    def __init__(self, prefix: bytes, role: str) -> None:
        """``prefix``: the child's, before the first piece's output line; ``role``: the
        child's, named in the later pieces' prefix where ``prefix`` is empty."""
        self.kept = KeptEnds()
        self._prefix, self._continued = prefix, continued_prefix(prefix, role)
        self._held = b""  # the start of a character the last piece's end cut
        #: whether the output :meth:`add` last gave is a later piece of the line (one line
        #: with its first in a drop notice's count: :meth:`launcher.terminal.Terminal.put`)
        self.continued = False
        self._shown = False

    def add(self, piece: bytes) -> bytes:
        """Take the line's next piece (the last ends in its newline); its line on the output,
        ``b""`` where it has none (a bare newline after a piece that ended on a character)."""
        self.kept.add(piece)
        whole, self._held = split_chars(self._held + piece)  # a cut character: to the next
        if whole in (b"", b"\n"):
            return b""
        shown = self._prefix + whole + (b"" if piece.endswith(b"\n") else b"\n")
        self._prefix = self._continued
        self.continued, self._shown = self._shown, True
        return shown


def _whole_pieces(line: bytes) -> Iterator[bytes]:
    """Yield ``line``'s first :data:`READ_PIECE` bytes, its next, as long as it has as many;
    return the rest."""
    at = 0
    while len(line) - at >= READ_PIECE:
        yield line[at : at + READ_PIECE]
        at += READ_PIECE
    return line[at:]


def _pipe_holds(fd: int) -> int:
    """The bytes the pipe ``fd`` holds unread at this moment (``FIONREAD``)."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4))[0]


class OutputPipe:
    """A child's output pipe as its pump reads it (:meth:`pieces`): whatever has come, never
    waiting with bytes read and not given (``readline`` held a line's start until its newline
    or the pipe's end), so that :meth:`end_line` can have the pump pass on the line under way
    where the launcher stops waiting for the pipe's end (a process outside the child's group
    holds it): the child's last words, printed without a newline as it died."""

    def __init__(self, fd: int) -> None:
        """``fd``: the pipe's read end, which only :meth:`pieces` reads."""
        self._fd = fd
        self._wake, self._waker = os.pipe()  # end_line's byte ends the pump's wait
        self._poll = select.poll()
        for each in (fd, self._wake):
            self._poll.register(each, select.POLLIN)
        self._ended = threading.Event()
        self._began = threading.Event()  # pieces() was entered: it reads, or found close()'s
        self._owed: int | None = None  # after end_line(): bytes to read before the line ends
        self._lock = threading.Lock()  # the wake-up pipe's state, between the two threads
        self._reading = False  # pieces() began and has not ended
        self._let_go = False  # close() was called: the last of the two closes the pipe
        self._closed = False

    def pieces(self) -> Iterator[bytes]:
        """The output's lines, each with its newline, a line over :data:`READ_PIECE` in pieces
        of that many bytes and its rest with the newline (as ``readline(READ_PIECE)`` gives
        them); at the pipe's end, a last line without its newline. After :meth:`end_line`, the
        line under way with a newline, however much of it came (its earlier pieces given, a
        bare newline). Nothing once :meth:`close` has closed the wake-up pipe."""
        with self._lock:
            self._began.set()
            if self._closed:
                return
            self._reading = True
        try:
            yield from self._lines()
        finally:  # the end, or the pump let go of it: close() may have waited for this
            with self._lock:
                self._reading = False
                if self._let_go:
                    self._close_wake_pipe()

    def _lines(self) -> Iterator[bytes]:
        """:meth:`pieces`' lines and pieces."""
        held: list[bytes] = []  # the line's start, read without its end: under READ_PIECE
        size, inside = 0, False  # held's bytes; whether pieces of the line were given
        while True:
            chunk = self._read()
            if chunk is None:  # end_line()
                if held or inside:
                    yield b"".join(held) + b"\n"
                held, size, inside = [], 0, False
                self._ended.set()  # the pump asks for more once it passed that on
                continue
            if not chunk:  # the pipe's end
                if held:
                    yield b"".join(held)
                return
            lines = chunk.split(b"\n")
            rest = lines.pop()
            if lines:
                if held:
                    lines[0], held, size = b"".join(held) + lines[0], [], 0
                for line in lines:
                    if len(line) >= READ_PIECE:
                        line = yield from _whole_pieces(line)
                    yield line + b"\n"
                inside = False
            if rest:
                held.append(rest)
                size += len(rest)
            if size >= READ_PIECE:
                rest = yield from _whole_pieces(b"".join(held))
                held, size, inside = [rest] if rest else [], len(rest), True

    def _read(self) -> bytes | None:
        """The pipe's next bytes (``b""`` at its end) once it has some, or None where
        :meth:`end_line` asks: once the bytes the pipe held as it asked are read, and no more
        (a pipe that never runs dry, a stray printing without pause, kept the wake-up waiting)."""
        while self._owed is None:
            ready = {fd for fd, _ in self._poll.poll()}
            if self._wake in ready:
                os.read(self._wake, 1)
                self._owed = _pipe_holds(self._fd)
            elif self._fd in ready:
                return os.read(self._fd, _READ_CHUNK)
        if self._owed > 0:
            chunk = os.read(self._fd, min(self._owed, _READ_CHUNK))
            self._owed -= len(chunk)
            return chunk
        self._owed = None
        return None

    def await_reader(self, alive: Callable[[], bool]) -> None:
        """Wait until :meth:`pieces` has begun, while ``alive()`` (the pump's thread runs):
        a pump not reading yet is a thread the host has not run yet (a loaded host), not one
        that a process outside the child's group holds up, and after :meth:`close` it would
        read nothing at all; the wait for the pipe's end may only start once it reads."""
        while alive() and not self._began.wait(0.05):
            continue

    def drain(self, pump: threading.Thread, timeout: float) -> bool:
        """At the launcher's end, the pump no longer held up by its output: up to ``timeout``
        seconds for it to take what the pipe holds now, its line under way ended
        (:meth:`end_line`; a process outside the child's group may hold the pipe for good), or
        to reach the pipe's end; whether it did. (A second stop signal does not cut it: the
        log is the whole record.)"""
        deadline = time.monotonic() + timeout
        # looked at each 0.05 s: a pump past the pipe's end (its last line still being handed
        # on) never answers, and must not spend the budget the other children share
        if self.end_line(min(timeout, 0.05), lambda at: time.monotonic() >= deadline):
            return True
        pump.join(max(0.0, deadline - time.monotonic()))  # it was at the pipe's end already
        return not pump.is_alive()

    def end_line(
        self,
        timeout: float,
        stuck: Callable[[float], bool] | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """From another thread: have the pump take what the pipe has, then pass on the line
        under way as ended (as :meth:`pieces` says). Whether it did within ``timeout`` seconds,
        or each ``timeout`` more while it is not ``stuck(at)`` (its writes hold the pump up: one
        begun at or before the monotonic ``at`` of the last look still waits, or they took too
        long in all): a pump that the host runs late answers, and the report's tail must have
        what it passes on (not where it waits on the launcher's own output, nor where
        :meth:`pieces` is not reading: at the pipe's end, nobody would answer). Not once
        ``stop()`` holds (a second stop signal), looked at every :data:`STOP_LOOK` seconds."""
        with self._lock:
            if not self._reading:
                return False
            self._ended.clear()
            os.write(self._waker, b"\0")
        look = time.monotonic()
        while not self._ended.wait(timeout if stop is None else min(timeout, STOP_LOOK)):
            if stop is not None and stop():
                return False
            if time.monotonic() - look < timeout:  # a look at stop() alone
                continue
            if stuck is None or stuck(look) or not self._reading:
                return False
            look = time.monotonic()
        return True

    def unheld(self) -> bool:
        """Whether no process holds the pipe's write end any more (``POLLHUP``; a process that
        left the child's group may): what the pipe holds is then all that it will."""
        probe = select.poll()
        probe.register(self._fd, 0)  # POLLHUP is reported whatever is asked for
        return any(event & select.POLLHUP for _, event in probe.poll(0))

    def close(self) -> None:
        """The owner lets go: close the wake-up pipe now, or, where :meth:`pieces` still reads
        (a process outside the child's group holds its pipe), as soon as it ends."""
        with self._lock:
            self._let_go = True
            if not self._reading:
                self._close_wake_pipe()

    def _close_wake_pipe(self) -> None:
        """Close both ends of the wake-up pipe, once; call under the lock."""
        if not self._closed:
            self._closed = True
            os.close(self._wake)
            os.close(self._waker)
