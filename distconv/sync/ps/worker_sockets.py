"""A worker's ZeroMQ context and sockets to its shards, and their end: a ``bye``, then closed.

A shard takes a worker that said ``hello`` and no ``bye`` for one still training. Where that
worker's process ends on the shard's host it is logged as killed or crashed (a sync job fails
on it; the next ``hello`` of its rank ends the run as a restart's); a SIGTERM of the shard
serves it on for the whole ``--drain-seconds``. A worker dropped without ``close()`` (a
notebook cell run again, a script that forgets ``close()``, an exception before it) left
exactly that behind. So what the end needs lives here, apart from the worker
(:class:`~distconv.sync.ps.client.PServerSync`), and :func:`end_when_dropped` has a
``weakref.finalize`` on the worker say the bye when the worker is collected or the interpreter
exits. Nothing here refers to the worker, so the finalizer keeps it alive through no cycle;
that is why the heartbeat's sockets are made here too (its thread holds what makes them).

At the interpreter's exit after an uncaught error (:func:`uncaught_error`), the bye carries it,
as a ``close()`` in a ``finally`` would: a sync shard then names this rank as the cause of the
step the others wait in, as it did when it saw the process end without a bye. At a garbage
collection the bye carries no error: nothing says which exception, if any, dropped the worker.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

import zmq

from distconv.endpoint import split_endpoint
from distconv.sync.ps import handshakes
from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.beats import Heartbeat
from distconv.sync.ps.config import tcp_url, uses_ipv6
from distconv.sync.ps.endings import ending_fields
from distconv.sync.ps.handshakes import HandshakeWatch
from distconv.sync.ps.wire import pack

#: the longest a request socket's close waits for its queued messages (the bye) to leave: a
#: shard that is gone must not hold the worker's end, nor the interpreter's exit, for long
CLOSE_LINGER_MS = 200
#: the id of a bye: no reply to it is read (the sockets close next), so any int does
BYE_ID = 0
#: what a dropped worker's bye says before the uncaught error that ended its interpreter
EXITED_ON = "exited after an uncaught error: "


class WorkerSockets:
    """The sockets of one worker (``rank`` of job ``job_id``, run ``run``) to ``endpoints``.

    Args:
        endpoints: the shards' ``HOST:PORT``, shard 0 first.
        keys_dir: the job's CURVE key directory; None or empty: no CURVE (``--insecure``).
        send_slice: seconds a blocked send of a request socket waits before it looks at the
            handshakes again (see :meth:`connect`).

    Attributes:
        socks: the request sockets, shard by shard.
        handshakes: the watch on their handshakes, once the worker made it.
        heartbeat: the async heartbeat while it beats.
        owes_bye: whether a shard may have heard this worker's hello: a bye is then said at
            its end (before, no shard knows the worker and a bye says nothing); set by
            :meth:`owe_bye`.
    """

    def __init__(
        self,
        endpoints: list[str],
        rank: int,
        job_id: str,
        run: int,
        keys_dir: str | None,
        send_slice: float,
    ) -> None:
        self.ctx = zmq.Context()
        self.endpoints = endpoints
        self.rank, self._job_id, self._run = rank, job_id, run
        self._keys_dir, self._send_slice = keys_dir, send_slice
        self.handshakes: HandshakeWatch | None = None
        self.heartbeat: Heartbeat | None = None
        self.owes_bye = False
        self._error_before: weakref.ref[ErrorAtSetup] | None = None  # the worker holds it
        self.closed = False
        self._pid = os.getpid()  # a forked child's exit must not end its parent's sockets
        self.socks: list[zmq.Socket] = [self.connect(s) for s in range(len(endpoints))]

    def connect(self, shard: int, immediate: bool = False) -> zmq.Socket:
        """A new DEALER socket to ``shard``, CURVE on with ``keys_dir``; any thread may call
        it (each socket then stays on its thread). With ``immediate``, a message the shard
        cannot take now is refused (``zmq.Again``), not queued."""
        sock = self.ctx.socket(zmq.DEALER)
        sock.linger = 0
        if immediate:
            sock.setsockopt(zmq.IMMEDIATE, 1)
            sock.setsockopt(zmq.SNDHWM, 2)
        else:  # a blocked send looks at the handshakes this often (see channel._send_frames)
            sock.sndtimeo = round(self._send_slice * 1000)
            handshakes.monitor_of(sock)  # before connect: a refusal at once is reported too
        if self._keys_dir:  # else --insecure: no CURVE
            keyfiles.curve_client(sock, keyfiles.worker_keys(self._keys_dir, self.rank))
        host, port = split_endpoint(self.endpoints[shard])
        sock.setsockopt(zmq.IPV6, uses_ipv6(host))
        sock.connect(tcp_url(host, port))
        return sock

    def beat_socket(self, shard: int) -> zmq.Socket:
        """The heartbeat's socket to ``shard`` (made on its thread): a beat the shard cannot
        take now is dropped, not queued."""
        return self.connect(shard, immediate=True)

    def owe_bye(self, owed: bool) -> ErrorAtSetup:
        """Whether a bye is owed from now on (a setup with parameters: its hello may go). The
        uncaught error of the interpreter so far (an earlier notebook cell's), not the one
        that ends it (:func:`uncaught_error`), is returned for the worker to hold: these
        sockets only refer to it (:class:`ErrorAtSetup`)."""
        self.owes_bye = owed
        noted = ErrorAtSetup(uncaught_error(at_exit=False))
        self._error_before = weakref.ref(noted)
        return noted

    def end(self) -> None:
        """The end of a worker dropped without ``close()``: stop the heartbeat, say ``bye``
        where one is owed (with the uncaught error that ends the interpreter, if any, at its
        exit: :meth:`_exit_error`), and close the sockets; nothing once closed. Bounded: the
        bye is only queued, and leaves within :data:`CLOSE_LINGER_MS` or not at all. Nothing
        in a forked child (its exit runs the finalizers it inherited): the sockets are its
        parent's."""
        if self.closed or os.getpid() != self._pid:
            return
        if self.heartbeat is not None and self.heartbeat.runs_here():
            # collected on the heartbeat's own thread (a garbage collection that ran there),
            # which cannot wait for itself to stop: another thread ends it all
            threading.Thread(target=self.end, daemon=True).start()
            return
        try:
            self.stop_heartbeat()
            if self.owes_bye:
                self._say_bye(self._exit_error())
        finally:
            self.close()

    def _exit_error(self) -> BaseException | None:
        """The uncaught error that ends the interpreter, where this end is at its exit and the
        error came after the latest setup (:meth:`owe_bye`); else None (a garbage collection
        while the program runs, a clean exit, an error older than the worker's training)."""
        error = uncaught_error(at_exit=True)
        noted = self._error_before() if self._error_before is not None else None
        return None if noted is not None and error is noted.error else error

    def _say_bye(self, error: BaseException | None) -> None:
        """``bye`` to every shard, as the worker's close says it
        (:meth:`~distconv.sync.ps.channel.ShardChannel._say_bye`) but on the sockets alone,
        with ``error``, the uncaught one its interpreter exits on, if any; a shard whose
        connection ZeroMQ dropped (it has no queue) is told nothing."""
        fields = bye_header(error)
        if "error" in fields:  # not raised through a close: said as what it is
            fields["error"] = EXITED_ON + fields["error"]
        header = {**fields, "id": BYE_ID, "job": self._job_id, "run": self._run}
        frames = pack({**header, "rank": self.rank})
        for sock in self.socks:
            with contextlib.suppress(zmq.Again):  # queued, or no queue at all: never a wait
                sock.send_multipart(frames, zmq.NOBLOCK)

    def stop_heartbeat(self) -> None:
        """End the heartbeat, if one beats (its thread closes its sockets)."""
        heartbeat, self.heartbeat = self.heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()

    def close(self) -> None:
        """Close the request sockets, their handshake watch and the context; nothing twice."""
        if self.closed:
            return
        self.closed = True
        if self.handshakes is not None:
            self.handshakes.close()
        for sock in self.socks:
            sock.close(linger=CLOSE_LINGER_MS)
        self.ctx.term()


def bye_header(error: BaseException | None) -> dict[str, Any]:
    """A ``bye``'s own fields, with ``error``, the exception the worker closes on, if any."""
    return {"op": "bye", **ending_fields(error)}


class ErrorAtSetup:
    """The interpreter's latest uncaught error at a worker's setup, held by the worker and
    only weakly by its sockets: that error's traceback may hold the worker (a fit that failed
    in an earlier cell), which the sockets' finalizer would then keep alive for good, beating
    and owing its bye, once a later error took that one's place. The worker lives while its
    end can be at the exit, so the note does too."""

    __slots__ = ("error", "__weakref__")

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


def uncaught_error(at_exit: bool) -> BaseException | None:
    """The latest error that reached the top of the interpreter uncaught (``sys.last_exc``,
    which its printing of the traceback sets; ``sys.last_value`` before Python 3.12). With
    ``at_exit``, only where the interpreter exits (its main thread has ended; not a garbage
    collection while the program runs), else None."""
    if at_exit and threading.main_thread().is_alive():
        return None
    error = getattr(sys, "last_exc", None)
    return error if error is not None else getattr(sys, "last_value", None)


def end_when_dropped(worker: object, sockets: WorkerSockets) -> Callable[[], Any]:
    """A finalizer that ends ``sockets`` (:meth:`WorkerSockets.end`) once ``worker`` is
    garbage-collected, or at the interpreter's exit; its ``detach()`` (at the worker's own
    close) cancels it. It holds ``sockets``, never ``worker``."""
    return weakref.finalize(worker, sockets.end)
