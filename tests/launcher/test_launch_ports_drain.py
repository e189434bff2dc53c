"""A reserved port's queue emptied between attempts (:func:`launcher.ports.drain_queued`).

The dying attempt's workers kept dialing their shard's port, and the kernel queued their
connections on the launcher's reserved socket; the next attempt's shard accepted them first
and logged each as a possible probe. Real sockets on 127.0.0.1.
"""

from __future__ import annotations

import socket

import pytest

from launcher.ports import drain_queued, reserve_ports


def _dial(port: int, times: int) -> None:
    """``times`` connections to ``port``, each closed at once, as a worker killed mid-dial."""
    for _ in range(times):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


@pytest.mark.timeout(30)
def test_connections_queued_while_no_shard_accepts_are_closed_and_counted():
    reserved = reserve_ports(2)
    try:
        (first, second) = [s.getsockname()[1] for s in reserved]
        _dial(first, 3)
        _dial(second, 1)
        assert drain_queued(reserved) == 4
        assert drain_queued(reserved) == 0  # nothing left for the next shard to take
    finally:
        for sock in reserved:
            sock.close()


@pytest.mark.timeout(30)
def test_a_drained_port_still_listens_and_blocks_as_the_shards_copy_expects():
    """The socket's blocking mode is one the shards' inherited copies share: put back."""
    (sock,) = reserve_ports(1)
    try:
        port = sock.getsockname()[1]
        _dial(port, 1)
        drain_queued([sock])
        assert sock.getblocking()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
            conn, _ = sock.accept()  # the next attempt's connection is served
            with conn:
                client.sendall(b"hello")
                assert conn.recv(5) == b"hello"
    finally:
        sock.close()
