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

A shard counts a rank's silence from its ``hello``, so each shard is beaten from the moment its
hello reply arrives (:meth:`HeartbeatOwner._ask_hellos`), not once every shard answered: a
shard that starts later than ``--timeout`` after the others (a pod still pending, pulling its
image or waiting for its volume) is waited for, instead of the others declaring the waiting
worker lost. One that never answers is then named by the worker's wait for its hello.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    """A thread that sends ``header`` (a ``beat``) to each of ``shards``, and those :meth:`add`
    gives it later, every ``interval`` seconds until :meth:`stop`.

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
        self.shards = {s for s, _ in shards}  # every shard given, beaten or refused since
        self._added: queue.SimpleQueue[tuple[int, str]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._wake = threading.Event()  # a shard added, or a stop: the round comes at once
        self._thread = threading.Thread(
            target=self._run,
            args=(connect, header, list(shards)),
            name=f"distconv-heartbeat-{header['rank']}-{header['run']}",
            daemon=True,  # a script that never closes its sync must still exit
        )
        self._thread.start()

    def add(self, shard: int, endpoint: str, interval: float) -> None:
        """Beat ``shard`` (at ``endpoint``) too, and every shard at least every ``interval``
        seconds from now on; nothing for a shard already given. Its socket is made in a round
        that comes at once, whose beat to it a connection not yet up drops: the round an
        interval on reaches it, well within its timeout (:data:`BEATS_PER_TIMEOUT` intervals)."""
        if shard in self.shards:
            return
        self.shards.add(shard)
        self.interval = min(self.interval, interval)
        self._added.put((shard, endpoint))
        self._wake.set()

    def _run(self, connect: Callable[[int], zmq.Socket], header: dict, shards: list) -> None:
        socks: dict[str, zmq.Socket] = {}
        try:
            for s, endpoint in shards:
                socks[endpoint] = connect(s)
            while True:
                woken = self._wake.wait(self.interval)  # else the interval passed: a round
                if self._stop.is_set():
                    break
                if woken:
                    self._wake.clear()
                    while not self._added.empty():  # a shard that just answered its hello
                        s, endpoint = self._added.get()
                        socks[endpoint] = connect(s)
                self._beat(socks, header)
        except Exception:  # a heartbeat that dies must say so where the job logs
            log.exception(
                "rank %d: the heartbeat failed; shards may declare it lost", header["rank"]
            )
        finally:
            for sock in socks.values():
                sock.close(linger=0)

    def _beat(self, socks: dict[str, zmq.Socket], header: dict) -> None:
        """One round: drop the shards that refused a beat, and beat the others."""
        for endpoint in _refusing(socks, header["rank"]):
            socks.pop(endpoint).close(linger=0)
        for sock in socks.values():
            try:  # a shard not connected (IMMEDIATE): the beat is dropped, not queued
                sock.send_multipart(pack({**header, "id": self.beats}), zmq.NOBLOCK)
                self.beats += 1
            except zmq.Again:
                pass

    def runs_here(self) -> bool:
        """Whether the caller is the heartbeat's own thread, which cannot wait for its stop."""
        return threading.current_thread() is self._thread

    def stop(self) -> None:
        """End the thread (at once: it waits on the wake event) and close its sockets."""
        self._stop.set()
        self._wake.set()
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


def beat_interval(hello: Mapping[str, Any]) -> float | None:
    """Seconds between beats for a shard whose ``hello`` reply is this: a quarter of its
    timeout, within :data:`INTERVAL_BOUNDS`; None where the shard takes none: its reply says
    sync mode (only async declares a rank lost) or no timeout (a shard that predates ``beat``)."""
    timeout = shard_timeouts([hello]).get(0)
    if timeout is None or hello.get("mode") != "async":
        return None
    low, high = INTERVAL_BOUNDS
    return min(max(timeout / BEATS_PER_TIMEOUT, low), high)


class HeartbeatOwner:
    """The heartbeat side of :class:`~distconv.sync.ps.client.PServerSync`: its hello, which
    starts the beats, and their end. It reads the worker's ``rank``, ``job_id``, ``endpoints``
    and ``_run``, and its channel's ``_beat_socket``, ``_send_all`` and ``_arrivals``
    (:class:`~distconv.sync.ps.channel.ShardChannel`)."""

    _heartbeat: Heartbeat | None = None
    rank: int
    job_id: str
    endpoints: list[str]
    _run: int
    #: makes the heartbeat's socket to a shard, on its thread (a beat the shard cannot take
    #: now is dropped, not queued); the thread holds it as long as it beats, so it must hold
    #: no worker: the sockets' own (:meth:`~.worker_sockets.WorkerSockets.beat_socket`)
    _beat_socket: Callable[[int], zmq.Socket]
    _send_all: Callable[..., list[int]]
    _arrivals: Callable[..., Iterator[tuple[int, tuple[dict[str, Any], list]]]]

    def _ask_hellos(
        self, head: dict[str, Any], check: Callable[[int, dict[str, Any]], None]
    ) -> list[tuple[dict[str, Any], list]]:
        """Send the hello ``head`` to every shard; their replies, by shard. Each shard is beaten
        as soon as its reply arrived and ``check(shard, header)`` (which raises on a reply this
        worker cannot take) passed: it counts this rank's silence from this hello on, however
        long the others take to answer (a shard started late). A beating heartbeat (a second
        setup's) stops first, and this one stops where the hello fails: a rank whose hello
        failed must not stay alive on the shards."""
        self._stop_heartbeat()
        rids = self._send_all([(s, head, ()) for s in range(len(self.endpoints))])
        replies: dict[int, tuple[dict[str, Any], list]] = {}
        try:  # closed early, the arrivals give up on the replies still awaited
            with contextlib.closing(self._arrivals(rids, "hello")) as arrivals:
                for rid, reply in arrivals:
                    shard = rids.index(rid)
                    check(shard, reply[0])
                    self._beat_from_hello(shard, reply[0])
                    replies[shard] = reply
        except BaseException:
            self._stop_heartbeat()
            raise
        return [replies[s] for s in range(len(rids))]

    def _beat_from_hello(self, shard: int, hello: dict[str, Any]) -> None:
        """Beat ``shard`` from now on, where its ``hello`` reply takes beats
        (:func:`beat_interval`): in the heartbeat running, or a new one."""
        if (interval := beat_interval(hello)) is None:
            return
        if self._heartbeat is not None:
            self._heartbeat.add(shard, self.endpoints[shard], interval)
            return
        header = {"op": "beat", "job": self.job_id, "rank": self.rank, "run": self._run}
        shards = [(shard, self.endpoints[shard])]
        self._heartbeat = Heartbeat(self._beat_socket, header, shards, interval)

    def _stop_heartbeat(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat = None
