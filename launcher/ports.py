"""The ports of a local job's shards: reserved for the whole launch, not only picked.

A port the launcher only picked (free a moment ago) could be taken by another process in the
second before its shard bound it, and the shard, with the attempt, failed with ``Address
already in use``. So the launcher opens a listening socket on each port itself
(:func:`reserve_ports`) and keeps it until it exits; every attempt's shard serves on its
inherited copy (``distconv pserver --bind-fd``), and the port never passes out of the job's
hands, over restarts too.
"""

from __future__ import annotations

import fcntl
import socket
from collections.abc import Iterable

#: connections a reserved port queues while no shard accepts (between attempts)
BACKLOG = 128


def reserve_ports(count: int, host: str = "127.0.0.1") -> list[socket.socket]:
    """``count`` TCP sockets listening on ``host``, each on its own port the kernel picked,
    inheritable (a child is given one with ``pass_fds``). The caller closes them.

    Raises:
        OSError: the kernel refused a socket (no port or descriptor left); those opened are
            closed.
    """
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = _above_stdio(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sockets.append(sock)
            sock.bind((host, 0))
            sock.listen(BACKLOG)
            sock.set_inheritable(True)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def drain_queued(sockets: Iterable[socket.socket]) -> int:
    """Accept and close every connection queued on ``sockets`` (reserved by
    :func:`reserve_ports`); returns how many. Call it between attempts, once the last
    attempt's children have ended and before the next one's shards start.

    The dying attempt's workers kept dialing their shard's port until they were stopped, and
    the kernel queued those connections on the reserved socket (up to ``BACKLOG``). The next
    attempt's shard accepted them first and, their peers gone, logged each as "refused a
    connection from an unknown address: its handshake ended early (... a port scan, a
    probe?)": a security warning in every restart's log for the launcher's own leftovers.
    """
    drained = 0
    for sock in sockets:
        blocking = sock.getblocking()  # shared with the shards' copies: put back as it was
        sock.setblocking(False)
        try:
            while True:
                try:
                    conn, _ = sock.accept()
                except (BlockingIOError, InterruptedError):  # nothing (more) queued
                    break
                except ConnectionAbortedError:  # reset while queued: gone already
                    continue
                conn.close()
                drained += 1
        finally:
            sock.setblocking(blocking)
    return drained


def _above_stdio(sock: socket.socket) -> socket.socket:
    """``sock`` on a descriptor above 2. A launcher started with stdin (or stdout) closed
    (``<&-``, a daemon's start) is handed 0 for its first socket; a child's 0 to 2 are its
    own streams (/dev/null, the output pipe), so ``--bind-fd 0`` named no socket there and
    every attempt's shard stopped: 'not an open socket'."""
    if sock.fileno() > 2:
        return sock
    try:
        return socket.socket(fileno=fcntl.fcntl(sock.fileno(), fcntl.F_DUPFD_CLOEXEC, 3))
    finally:
        sock.close()


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that were free on ``host`` a moment ago, for a program that
    binds a port itself (a ``--health-port``): all are held until every one is chosen, so the
    kernel never hands out one twice, then let go."""
    sockets = reserve_ports(count, host)
    try:
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
