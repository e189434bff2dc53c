"""When bytes last arrived on a worker's TCP connection to a shard.

ZeroMQ hands a message over only once all of it arrived, so a shard sending a large reply (a
pull of the whole model, a checkpoint's optimizer state) looks silent to the worker until its
last byte is in. The kernel knows better: Linux's ``TCP_INFO`` says how long ago the connection
last received data (``tcpi_last_data_recv``), which tells a reply still crossing (bytes keep
coming) from a shard that is gone or stuck (none come). ZeroMQ owns the connection's socket; its
monitor reports the descriptor when the connection is made (``EVENT_CONNECTED``), and
:class:`Link` reads it through a duplicate, checking first that it is still the same
connection, by both ends' addresses (the descriptor may have been closed and its number reused,
by a file or by another connection to the same shard: ZeroMQ's reconnect, the heartbeat's).

The other way is as silent: a shard answers a seed, a push or a ``set_state`` only once all of
it arrived. A shard that takes the worker's bytes acknowledges them (``tcpi_bytes_acked``, a
count that grows only as the shard's side takes them in: a window full and not read, as a
stopped process leaves it, stops it), so a change of that count, seen between two reads, is
heard too.
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import time

#: the offsets in Linux's ``struct tcp_info`` of ``tcpi_last_data_recv`` (milliseconds, u32)
#: and ``tcpi_bytes_acked`` (u64, Linux 4.1 and later)
_LAST_DATA_RECV = 52
_BYTES_ACKED = 120
_INFO_BYTES = 128


def _linux_layout() -> bool:
    """Whether ``TCP_INFO`` has Linux's layout: FreeBSD's has ``TCP_INFO`` too, but other
    fields from offset 100 on (at 120, retransmit counts, which grow the most on a dead link)."""
    return sys.platform.startswith("linux") and hasattr(socket, "TCP_INFO")


class Link:
    """A worker's TCP connection to a shard, made by ZeroMQ on descriptor ``fd``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.ends = ends_of(fd)
        self._acked: int | None = None  # the count of bytes the peer acknowledged, when read
        self._acked_at = 0.0  # when that count was first read
        info = self._info()
        if info is not None and len(info) >= _BYTES_ACKED + 8:
            self._acked, self._acked_at = struct.unpack_from("Q", info, _BYTES_ACKED)[0], 0.0

    def idle(self) -> float | None:
        """Seconds since data last arrived on this connection, or since a read of it first saw
        the shard's side take in more of this worker's bytes, whichever is less; None where
        that cannot be read (not Linux, the connection closed, its descriptor now another
        socket's)."""
        info = self._info()
        if info is None or len(info) < _LAST_DATA_RECV + 4:
            return None
        idle = struct.unpack_from("I", info, _LAST_DATA_RECV)[0] / 1000.0
        if self._acked is None or len(info) < _BYTES_ACKED + 8:
            return idle
        now, acked = time.monotonic(), struct.unpack_from("Q", info, _BYTES_ACKED)[0]
        if acked != self._acked:
            self._acked, self._acked_at = acked, now
        return min(idle, now - self._acked_at)

    def _info(self) -> bytes | None:
        """The connection's ``struct tcp_info``; None where it cannot be read."""
        if self.ends is None or not _linux_layout():
            return None
        sock = _duplicate(self.fd)
        if sock is None:
            return None
        with sock:
            if _ends(sock) != self.ends:
                return None
            try:
                return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_BYTES)
            except OSError:
                return None


def _duplicate(fd: int) -> socket.socket | None:
    """A socket on a duplicate of ``fd`` (ZeroMQ's descriptor stays open), to be closed by the
    caller; None where ``fd`` is closed or no socket (its number reused for a file), the
    duplicate then closed at once: a wait reads its links at every poll."""
    try:
        dup = os.dup(fd)
    except OSError:
        return None
    try:
        return socket.socket(fileno=dup)
    except OSError:  # ENOTSOCK: socket() keeps the descriptor it was given, and fails
        os.close(dup)
        return None


def ends_of(fd: int) -> tuple[object, object] | None:
    """The local and peer addresses of the connected stream socket on ``fd``, else None."""
    sock = _duplicate(fd)
    if sock is None:
        return None
    with sock:
        return _ends(sock)


def _ends(sock: socket.socket) -> tuple[object, object] | None:
    """``sock``'s local and peer addresses, which tell one connection from any other open
    at the same time (another to the same shard has another local port); None where it is no
    connected stream socket."""
    try:
        if sock.type != socket.SOCK_STREAM:
            return None
        return sock.getsockname(), sock.getpeername()
    except OSError:
        return None
