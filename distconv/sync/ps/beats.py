"""A worker's heartbeat in async mode: a ``beat`` to every shard, from a thread of its own.

In async mode a shard declares a rank lost when it has said nothing for the shard's
``--timeout`` (``--on-worker-loss``). Requests alone tell a live worker from a dead one only
while it pushes: a worker that evaluates, writes a checkpoint or waits in a collective on shard
0 sends nothing to the other shards, and would be declared lost while it works. With the
heartbeat, silent means that the process is gone or stopped. The thread sends a ``beat`` to
every shard :data:`BEATS_PER_TIMEOUT` times per shortest shard timeout, on sockets of its own
(a ZeroMQ socket belongs to one thread), and reads and drops the replies. An error reply (that
shard failed, or a newer worker of this rank said ``hello`` there) ends the beats to that shard
alone, logged: the main thread learns the cause from its next request, and the other shards
still hear from a process that lives.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from distconv.sync.ps.config import MIN_TIMEOUT
from distconv.sync.ps.shard_timeouts import shard_timeouts
from distconv.sync.ps.wire import WireError, pack, unpack_header

log = logging.getLogger("distconv.pserver")

#: beats per shard timeout: a rank is declared lost only after this many in a row went missing
BEATS_PER_TIMEOUT = 4
#: bounds of the time between beats, in seconds: no flood, and no wait the thread cannot make
#: (a shard's timeout is at least ``MIN_TIMEOUT``, four beats of the lower bound)
INTERVAL_BOUNDS = (MIN_TIMEOUT / BEATS_PER_TIMEOUT, 3600.0)


class Heartbeat:
    """A thread that sends ``header`` (a ``beat``) to each of ``shards`` every ``interval``
    seconds until :meth:`stop`.

    Args:
        connect: makes the socket to shard ``s`` (called on the heartbeat's thread).
        header: the beat's header (``op``, ``job``, ``rank``, ``run``); each beat adds its id.
        shards: the shards to beat, as ``(index, endpoint)`` (the endpoint for the log).
        interval: seconds between beats.
    """

    def __init__(
        self,
        connect: Callable[[int], zmq.Socket],
        header: dict[str, Any],
        shards: Sequence[tuple[int, str]],
        interval: float,
    ) -> None:
        self.interval = interval
        self.beats = 0  # beats ZeroMQ took (one per shard and round; a dropped one not)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run,
            args=(connect, header, list(shards)),
            name=f"distconv-heartbeat-{header['rank']}-{header['run']}",
            daemon=True,  # a script that never closes its sync must still exit
        )
        self._thread.start()

    def _run(self, connect: Callable[[int], zmq.Socket], header: dict, shards: list) -> None:
        socks: dict[str, zmq.Socket] = {}
        try:
            for s, endpoint in shards:
                socks[endpoint] = connect(s)
            while socks and not self._stop.wait(self.interval):
                for endpoint in _refusing(socks, header["rank"]):
                    socks.pop(endpoint).close(linger=0)
                for sock in socks.values():
                    try:  # a shard not connected (IMMEDIATE): the beat is dropped, not queued
                        sock.send_multipart(pack({**header, "id": self.beats}), zmq.NOBLOCK)
                        self.beats += 1
                    except zmq.Again:
                        pass
        except Exception:  # a heartbeat that dies must say so where the job logs
            log.exception(
                "rank %d: the heartbeat failed; shards may declare it lost", header["rank"]
            )
        finally:
            for sock in socks.values():
                sock.close(linger=0)

    def stop(self) -> None:
        """End the thread (at once: it waits on the stop event) and close its sockets."""
        self._stop.set()
        self._thread.join()


def _refusing(socks: dict[str, zmq.Socket], rank: int) -> list[str]:
    """The shards (endpoints) whose replies since the last beat include an error, logged."""
    refusing = []
    for endpoint, sock in socks.items():
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
                    "rank %d: heartbeat refused by pserver %s, no more beats to it: %s",
                    rank,
                    endpoint,
                    error,
                )
                refusing.append(endpoint)
                break
    return refusing


def start_heartbeat(
    connect: Callable[[int], zmq.Socket],
    header: dict[str, Any],
    endpoints: Sequence[str],
    hellos: Sequence[dict[str, Any]],
) -> Heartbeat | None:
    """A :class:`Heartbeat` to the shards whose ``hello`` reply (in ``hellos``, by shard) says
    async mode (the only mode that declares a rank lost) and a timeout (a shard whose reply
    does not predates ``beat``); None when there is none."""
    timeouts = {s: t for s, t in shard_timeouts(hellos).items() if hellos[s].get("mode") == "async"}
    if not timeouts:
        return None
    low, high = INTERVAL_BOUNDS
    interval = min(max(min(timeouts.values()) / BEATS_PER_TIMEOUT, low), high)
    return Heartbeat(connect, header, [(s, endpoints[s]) for s in sorted(timeouts)], interval)


class HeartbeatOwner:
    """The heartbeat side of :class:`~distconv.sync.ps.client.PServerSync`."""

    _heartbeat: Heartbeat | None = None
    rank: int
    job_id: str
    endpoints: list[str]
    _run: int
    _connect: Callable[..., zmq.Socket]

    def _start_heartbeat(self, hellos: Sequence[dict[str, Any]]) -> None:
        """Beat the shards that take it (see :func:`start_heartbeat`), from this run's hello
        on; a heartbeat already running (a second setup) stops first."""
        self._stop_heartbeat()
        header = {"op": "beat", "job": self.job_id, "rank": self.rank, "run": self._run}

        def connect(shard: int) -> zmq.Socket:
            return self._connect(shard, immediate=True)

        self._heartbeat = start_heartbeat(connect, header, self.endpoints, hellos)

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
