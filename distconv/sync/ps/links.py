"""When bytes last arrived on a worker's TCP connection to a shard.

ZeroMQ hands a message over only once all of it arrived, so a shard sending a large reply (a
pull of the whole model, a checkpoint's optimizer state) looks silent to the worker until its
last byte is in. The kernel knows better: Linux's ``TCP_INFO`` says how long ago the connection
last received data (``tcpi_last_data_recv``), which tells a reply still crossing (bytes keep
coming) from a shard that is gone or stuck (none come). ZeroMQ owns the connection's socket; its
monitor reports the descriptor when the connection is made (``EVENT_CONNECTED``), and
:class:`Link` reads it through a duplicate, checking first that it still leads to the same peer
(the descriptor may have been closed and its number reused).
"""

from __future__ import annotations

import os
import socket
import struct

#: the offset of ``tcpi_last_data_recv`` (milliseconds, u32) in Linux's ``struct tcp_info``
_LAST_DATA_RECV = 52
_INFO_BYTES = 104


class Link:
    """A worker's TCP connection to a shard, made by ZeroMQ on descriptor ``fd``."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.peer = _peer(fd)

    def idle(self) -> float | None:
        """Seconds since data last arrived on this connection; None where that cannot be
        read (not Linux, the connection closed, or its descriptor now another socket's)."""
        if self.peer is None or not hasattr(socket, "TCP_INFO"):
            return None
        try:
            with socket.socket(fileno=os.dup(self.fd)) as sock:  # a duplicate: ZeroMQ's stays
                if _address(sock) != self.peer:
                    return None
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _INFO_BYTES)
        except OSError:
            return None
        if len(info) < _LAST_DATA_RECV + 4:
            return None
        return struct.unpack_from("I", info, _LAST_DATA_RECV)[0] / 1000.0


def _peer(fd: int) -> object:
    """The peer address of the TCP socket on ``fd``, or None where it is none."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return None
    with sock:
        return _address(sock)


def _address(sock: socket.socket) -> object:
    try:
        if sock.type != socket.SOCK_STREAM:
            return None
        return sock.getpeername()
    except OSError:
        return None
