"""A TCP relay between a worker and its shard whose connections a test can cut: the network
dropping a live connection, while both ends stay up (a worker connects again through it)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


class Relay:
    """Listens on 127.0.0.1 (:attr:`endpoint`) and relays each connection to ``target``
    (``HOST:PORT``) until :meth:`cut` or :meth:`close`; threads of its own, all daemons."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def cut(self) -> int:
        """Close every connection relayed now, both ends; how many there were."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        return len(pairs)

    def close(self) -> None:
        """Stop listening, and cut what is relayed."""
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                server = socket.create_connection(self._target)
            except OSError:  # closed
                return
            with self._lock:
                self._pairs.append((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy ``src``'s bytes to ``dst`` until either closes; then close both."""
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    for sock in (src, dst):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@contextlib.contextmanager
def relay_to(target: str) -> Iterator[Relay]:
    """A :class:`Relay` to ``target``, closed at the end."""
    relay = Relay(target)
    try:
        yield relay
    finally:
        relay.close()
