"""A worker's heartbeat in async mode: a ``beat`` to every shard, from a thread of its own.

In async mode a shard declares a rank lost when it has said nothing for the shard's
``--timeout`` (``--on-worker-loss``). Requests alone tell a live worker from a dead one only
while it pushes: a worker that evaluates, writes a checkpoint or waits in a collective on shard
0 sends nothing to the other shards, and would be declared lost while it works. With the
heartbeat, silent means that the process is gone or stopped. The thread sends a ``beat`` to
every shard :data:`BEATS_PER_TIMEOUT` times per shortest shard timeout, on sockets of its own
(a ZeroMQ socket belongs to one thread). It reads and drops the replies. An error reply (the
shard failed, or a newer worker of this rank said ``hello``) ends the heartbeat, logged: the
shard then sees the rank as silent, and the main thread learns the cause from its next request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from distconv.sync.ps.wire import WireError, pack, unpack_header

log = logging.getLogger("distconv.pserver")

#: beats per shard timeout: a rank is declared lost only after this many in a row went missing
BEATS_PER_TIMEOUT = 4


class Heartbeat:
    """A thread that sends ``header`` (a ``beat``) to every shard every ``interval`` seconds
    until :meth:`stop`.

    Args:
        connect: makes the socket to shard ``s`` (called on the heartbeat's thread).
        header: the beat's header (``op``, ``job``, ``rank``, ``run``); each beat adds its id.
        shards: how many shards.
        interval: seconds between beats.
        endpoints: the shards' addresses, for the log.
    """

    def __init__(
        self,
        connect: Callable[[int], zmq.Socket],
        header: dict[str, Any],
        endpoints: Sequence[str],
        interval: float,
    ) -> None:
        self.interval = interval
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run,
            args=(connect, header, list(endpoints)),
            name=f"distconv-heartbeat-{header['rank']}",
            daemon=True,  # a script that never closes its sync must still exit
        )
        self._thread.start()

    def _run(self, connect: Callable[[int], zmq.Socket], header: dict, endpoints: list) -> None:
        socks = [connect(s) for s in range(len(endpoints))]
        try:
            while not self._stop.wait(self.interval):
                if not self._replies_fine(socks, endpoints, header["rank"]):
                    return
                for sock in socks:
                    try:  # a shard that is down: drop the beat, it would only queue up
                        sock.send_multipart(pack({**header, "id": self.beats}), zmq.NOBLOCK)
                    except zmq.Again:
                        pass
                self.beats += 1
        finally:
            for sock in socks:
                sock.close(linger=0)

    @staticmethod
    def _replies_fine(socks: list[zmq.Socket], endpoints: list[str], rank: int) -> bool:
        """Read the replies that came since the last beat; False (logged) on an error reply."""
        for sock, endpoint in zip(socks, endpoints):
            while True:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK)
                except zmq.Again:
                    break
                try:
                    error = unpack_header(frames[0], request=False).get("error")
                except WireError as exc:
                    error = f"malformed reply: {exc}"
                if error is not None:
                    log.warning(
                        "rank %d: heartbeat refused by pserver %s, stopped: %s",
                        rank,
                        endpoint,
                        error,
                    )
                    return False
        return True

    def stop(self) -> None:
        """End the thread (within one interval's wait: at once) and close its sockets."""
        self._stop.set()
        self._thread.join()


def start_heartbeat(
    connect: Callable[[int], zmq.Socket],
    header: dict[str, Any],
    endpoints: Sequence[str],
    hellos: Sequence[dict[str, Any]],
) -> Heartbeat | None:
    """A :class:`Heartbeat` when the shards run in async mode (the only mode that declares a
    rank lost) and every one says its timeout in its ``hello`` reply (one that does not
    predates ``beat``); else None."""
    timeouts = [h.get("timeout") for h in hellos]
    if any(h.get("mode") != "async" for h in hellos) or None in timeouts:
        return None
    return Heartbeat(connect, header, endpoints, min(timeouts) / BEATS_PER_TIMEOUT)
