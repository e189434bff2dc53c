"""A link reads a descriptor that ZeroMQ owns and may close at any time.

:class:`~distconv.sync.ps.links.Link` keeps the number of ZeroMQ's connection descriptor,
reported at ``EVENT_CONNECTED``; ZeroMQ closes it when the connection drops, and the monitor's
``EVENT_DISCONNECTED`` is read only at the worker's next poll, so a wait may read the number
after it was given to something else: a file this process opened, or another connection to the
same shard (ZeroMQ's reconnect, the heartbeat's socket). Here the number is reused on purpose
(``os.dup2``), with plain sockets on 127.0.0.1 port 0.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile

import pytest

from distconv.sync.ps.links import Link

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a link's bytes are read with Linux's TCP_INFO"
)


@pytest.fixture
def listener():
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def connect() -> socket.socket:
        """A new connection to the listener (its accepted side kept open)."""
        sock = socket.create_connection(server.getsockname(), timeout=10)
        accepted.append(server.accept()[0])
        return sock

    yield connect
    for sock in [server, *accepted]:
        sock.close()


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.timeout(30)
def test_a_link_whose_number_is_now_a_file_s_reads_nothing_and_leaks_nothing(listener):
    conn = listener()
    link = Link(conn.fileno())
    assert link.idle() is not None
    with tempfile.TemporaryFile() as file:
        os.dup2(file.fileno(), conn.fileno())  # the connection closed, its number a file's
        before = _open_descriptors()
        for _ in range(50):  # a wait reads its links at every poll
            assert link.idle() is None
        assert _open_descriptors() == before, "a descriptor duplicated per read stays open"
    conn.close()


@pytest.mark.timeout(30)
def test_a_link_whose_number_is_now_another_connection_s_to_that_peer_reads_nothing(listener):
    conn, other = listener(), listener()  # the same shard: its reconnect, or the heartbeat's
    link = Link(conn.fileno())
    assert link.idle() is not None
    os.dup2(other.fileno(), conn.fileno())  # the connection closed, its number the other's
    assert link.idle() is None, "another connection's bytes taken for this one's"
    conn.close()
    other.close()
