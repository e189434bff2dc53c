"""The worker's request/reply plumbing: one DEALER socket per shard, requests numbered and
sent without copying, replies matched to them by id, every wait bounded by a timeout."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np
import zmq

from distconv import stop_request
from distconv.rank_waits import Wait, waiting
from distconv.sync.base import SyncError, closing_error
from distconv.sync.ps.beats import Heartbeat
from distconv.sync.ps.bulk import BulkRuns
from distconv.sync.ps.channel_gone import GoneShards, request_words
from distconv.sync.ps.give_up_words import given_up_after_stop, no_answer_text
from distconv.sync.ps.handshakes import HandshakeWatch
from distconv.sync.ps.intake import ReplyIntake
from distconv.sync.ps.lost_requests import LostRequests
from distconv.sync.ps.processes import LOOK_EVERY, ProcessWatch
from distconv.sync.ps.releases import other_protocol
from distconv.sync.ps.reply_errors import late_reply_error, shard_error
from distconv.sync.ps.shard_silence import SilentShards, unresolved_hint
from distconv.sync.ps.shard_timeouts import ShardTimeouts
from distconv.sync.ps.stuck import wait_words
from distconv.sync.ps.wire import MAX_HEADER_BYTES, pack, send
from distconv.sync.ps.worker_sockets import WorkerSockets, bye_header, end_when_dropped

#: ``shard_error`` lives in :mod:`~distconv.sync.ps.reply_errors`; still importable from here
__all__ = ["ShardChannel", "shard_error"]

log = logging.getLogger("distconv.pserver")

#: a worker waits this much longer than ``timeout`` for a shard's reply (from the wait's start
#: or that shard's latest reply), so that the shard's own timeout (which names the missing
#: worker) fires first when both use the same value
GRACE = 1.5
#: once this process is asked to stop (SIGTERM, Ctrl-C: :func:`distconv.stop_request.pending`),
#: a step's wait that hears nothing from a shard it waits for in this many seconds gives up
#: (SyncError), or in :data:`QUIET_FACTOR` times the longest such silence of a shard its waits
#: have seen before, if longer (the other shards' replies say nothing of it, and a large reply's
#: bytes crossing end it): live peers answer about as soon as they always did, so the shard waits
#: for a worker that is gone (killed, out of memory), which would hold this one until SIGKILL.
#: Only a step's waits (push replies, a prefetch), pulls and get_state (answered at once): a
#: metrics sum or a barrier may wait long for a live rank that evaluates or writes a checkpoint.
STOP_PATIENCE = 5.0
QUIET_FACTOR = 3.0
#: a shard is silent while a large reply crosses (ZeroMQ hands over whole messages), so it is
#: heard from while bytes arrive on its link (links.py): a dead one is named within the timeout
#: or a stop's patience of its last byte; where the link cannot be read (not Linux), a shard owing
#: a pull's or get_state's reply gets its bytes (a pull's once per worker) over this
SLOW_LINK_BYTES = 12.5e6
#: the longest single poll of a wait, so that a stop request is seen this soon
POLL_SLICE = 0.25
#: a wait's fewest link reads per limit: a stopped upload is named at most 1/4 limit late
LINK_READS = 4
#: the longest poll of any wait: ZeroMQ takes its milliseconds as a C long, which a huge but
#: finite ``--timeout`` (1e300) overflowed; the wait's deadline still decides when it ends
LONGEST_POLL = 3600.0


class ShardChannel(ReplyIntake, BulkRuns, ShardTimeouts, GoneShards, LostRequests, SilentShards):
    """The request side of :class:`~.client.PServerSync`: connect, send, receive the replies.
    Its sockets are :attr:`_sockets`' (:mod:`~distconv.sync.ps.worker_sockets`)."""

    _sockets: WorkerSockets

    @property
    def _heartbeat(self) -> Heartbeat | None:
        """The async heartbeat while it beats: the sockets' own, which a dropped worker's end
        stops (:mod:`~distconv.sync.ps.worker_sockets`)."""
        return self._sockets.heartbeat

    @_heartbeat.setter
    def _heartbeat(self, heartbeat: Heartbeat | None) -> None:
        self._sockets.heartbeat = heartbeat

    #: the longest silence a stoppable wait saw while no stop was asked (:data:`STOP_PATIENCE`)
    _usual_quiet = 0.0
    #: the processes of the shards beside this worker (from their hello replies)
    _shard_processes: ProcessWatch | None = None
    #: the handshakes of the request sockets (see :meth:`_open_poller`)
    _handshakes: HandshakeWatch | None = None

    def _watch_shards(self, replies: Sequence[tuple[dict[str, Any], list]]) -> None:
        """Follow the process of each shard whose hello reply says it runs on this host: a
        wait on it then ends as soon as it is gone (killed, crashed), not at the timeout;
        and keep the shards' timeouts, warning where one is no shorter than this worker's
        wait (:class:`~.shard_timeouts.ShardTimeouts`)."""
        self._take_shard_timeouts([h for h, _ in replies], self.timeout * GRACE)
        self._shard_processes = watch = ProcessWatch()
        for s, (header, _) in enumerate(replies):
            watch.track(s, header.get("process", ""), header.get("host", ""))

    def _open_sockets(self, keys_dir: str | None) -> None:
        """Connect to every shard (CURVE with ``keys_dir``), and poll the sockets. They are
        :attr:`_sockets`' (:mod:`~distconv.sync.ps.worker_sockets`), which a worker dropped
        without ``close()`` ends with a bye: that finalizer and the heartbeat's thread hold
        them alone, never this worker, which stays collectable."""
        rank, job, run = self.rank, self.job_id, self._run
        self._sockets = WorkerSockets(self.endpoints, rank, job, run, keys_dir, POLL_SLICE)
        self._socks = self._sockets.socks
        self._end_when_dropped = end_when_dropped(self, self._sockets)
        self._beat_socket = self._sockets.beat_socket  # the heartbeat's: holds no worker
        self._gone: dict[int, str] = {}
        self._poller = self._open_poller()

    def _connect(self, shard: int, immediate: bool = False) -> zmq.Socket:
        """A new socket to ``shard``: :meth:`~.worker_sockets.WorkerSockets.connect`."""
        return self._sockets.connect(shard, immediate)

    def _open_poller(self) -> zmq.Poller:
        """The poller of the request sockets (``_socks``), with a watch on their handshakes
        (:mod:`~distconv.sync.ps.handshakes`) that a wait reads as it polls."""
        poller = zmq.Poller()
        for s in self._socks:
            poller.register(s, zmq.POLLIN)
        self._handshakes = HandshakeWatch(self._socks, poller, self._insecure)
        self._watch_drops()  # its drops count from 0
        self._sockets.handshakes = self._handshakes  # closed with the sockets, however they end
        return poller

    def _close_sockets(self) -> None:
        """Close the request sockets, their handshake watch and the context."""
        self._sockets.close()

    # -- requests -----------------------------------------------------------------------------
    def _say_bye(self) -> None:
        """``bye`` to every shard, with the exception this worker closes on if one propagates
        (a sync shard then fails a step that waits for this worker at once, naming it); no
        reply is waited for."""
        bye = bye_header(closing_error())
        for s in range(len(self._socks)):
            with contextlib.suppress(SyncError):  # a connection ZeroMQ dropped takes nothing
                self._send(s, bye, patience=0.0)

    def _send(
        self,
        shard: int,
        header: dict[str, Any],
        arrays: Sequence[np.ndarray] = (),
        track: bool = False,
        patience: float | None = None,
    ) -> int:
        """Send one request; returns its id (remembered with its shard, for timeout messages).
        With ``track``, ``self._trackers[shard]`` holds the message's ``zmq.MessageTracker``
        (None when it has no array frame). ``patience``: see :meth:`_send_frames`."""
        if self._gone:  # its answer would never come: not a second wait of the whole limit
            self._refuse_gone([shard], request_words(header))
        if self._handshakes is not None:  # a drop read now took the requests before, not this
            self._refuse_handshake(self._handshakes.monitor(shard))
            self._note_drops(shard)
        rid = self._next_id
        self._next_id += 1
        head = {**header, "id": rid, "job": self.job_id, "rank": self.rank, "run": self._run}
        frames = pack(head, arrays)
        if len(frames[0]) > MAX_HEADER_BYTES:  # the shard cannot read it, nor say whose it is
            raise SyncError(
                f"rank {self.rank}: a {header.get('op')} header of {len(frames[0])} bytes, more "
                f"than the {MAX_HEADER_BYTES} a shard reads (a seed's lists every parameter and "
                f"the shard's blocks; a pull's, push's or gather's, its blocks or values)"
            )
        tracker = self._send_frames(shard, frames, track, patience)
        self._rid_shard[rid] = shard
        if track:
            self._trackers[shard] = tracker
        self._bytes_pushed += len(frames[0]) + sum(a.nbytes for a in arrays)
        return rid

    def _send_frames(
        self, shard: int, frames: list[Any], track: bool, patience: float | None
    ) -> Any:
        """:func:`~distconv.sync.ps.wire.send` to ``shard``. A send blocks only where ZeroMQ
        dropped the connection (a refused handshake, which has no queue) or the shard reads
        nothing: it tries in slices, with a look at the handshakes between them, for
        ``patience`` seconds (the wait's limit, ``GRACE`` x ``timeout``, by default).

        Raises:
            SyncError: a refused handshake, or no room for the message within ``patience``.
        """
        sock = self._socks[shard]
        limit = self.timeout * GRACE if patience is None else patience
        deadline = _now() + limit
        while True:
            try:
                return send(sock, frames, track=track)
            except zmq.Again:
                if self._handshakes is not None:
                    self._refuse_handshake(self._handshakes.monitor(shard))
                if _now() >= deadline:
                    raise SyncError(
                        f"rank {self.rank}: pserver shard {shard} ({self.endpoints[shard]}) "
                        f"took no message for {limit:g} s: ZeroMQ dropped the connection, or "
                        "the shard reads nothing"
                    ) from None

    def _wait(
        self, rids: Sequence[int], what: str, stoppable: bool = False, asked: str = ""
    ) -> list[tuple[dict[str, Any], list]]:
        """The replies to ``rids``, in order; SyncError on an error reply or past the timeout."""
        got = {rid: reply for rid, reply in self._arrivals(rids, what, stoppable, asked)}
        return [got[r] for r in rids]

    def _arrivals(
        self, rids: Sequence[int], what: str, stoppable: bool = False, asked: str = ""
    ) -> Iterator[tuple[int, tuple]]:
        """``(rid, (header, arrays))`` for each of ``rids`` as its reply arrives, so a caller
        can use one while the others are still on their way.

        Args:
            stoppable: a step's wait, which gives up once a stop was asked and a shard it
                waits for has been silent for longer than any ever was (:data:`STOP_PATIENCE`).
            asked: the request ``rids`` are, where ``what`` is another (a pull's ``stats``,
                sent before it): a silent shard is named as asked for it.

        Raises:
            SyncError: an error reply, or a shard with replies still awaited silent for
                ``GRACE`` x ``timeout`` (from the wait's start or that shard's latest reply),
                or the stop's patience; :class:`~distconv.sync.peers.PeerFailed` for an error
                reply whose ``failed_ranks`` names other ranks than this one, or whose
                ``stopped_shard`` names a shard stopped on its own signal
                (:func:`~distconv.sync.ps.reply_errors.reply_error`); a
                :class:`~distconv.sync.ps.late_ranks.RanksLate` where it names ranks late to
                the job check.
        """
        missing = set(rids)
        try:
            yield from self._collect(missing, self.timeout * GRACE, what, stoppable, asked)
        finally:  # an error reply, a timeout, or a caller that stopped reading
            self._drop_replies(missing)
            self._end_asking()

    def _collect(
        self, missing: set[int], limit: float, what: str, stoppable: bool, asked: str
    ) -> Iterator[tuple[int, tuple]]:
        """:meth:`_arrivals`' loop; takes each arrived reply's id out of ``missing``."""
        if self._gone:  # a request sent before its shard was found gone (a prefetched pull)
            self._refuse_gone({self._rid_shard.get(r, -1) for r in missing}, wait_words(what))
        start = polled = _now()  # polled: when quiet was read
        answered: dict[int, float] = {}  # a shard's latest reply in this wait (-1: not known)
        quiet: dict[int, float] = {}  # each shard last heard (a reply, its bytes) at polled
        while missing:
            arrived = [r for r in missing if r in self._replies]
            for rid in arrived:
                missing.discard(rid)
                shard = self._rid_shard.pop(rid, -1)  # a long run sends millions of requests
                self._rid_bytes.pop(rid, None)
                if stoppable and stop_request.pending() is None:  # silence as a stop counts it
                    heard = max(answered.get(shard, start), quiet.get(shard, start))
                    self._usual_quiet = max(self._usual_quiet, _now() - heard)
                answered[shard] = _now()
                self._heard_again(shard)
                reply = self._replies.pop(rid)
                if reply[0]["op"] == "error":
                    raise self._error_reply(shard, what, reply[0])
                yield rid, reply
            if not missing:
                return
            was, quiet = quiet, self._heard(missing, answered, start)
            if stoppable and stop_request.pending() is None:  # silences bytes since ended
                ended = [polled - was.get(s, start) for s, t in quiet.items() if t > polled]
                self._usual_quiet, polled = max(self._usual_quiet, *ended, 0.0), _now()
            deadline = min(quiet.values()) + limit
            left = deadline - _now()
            if left <= 0:
                shards = [s for s, t in quiet.items() if t + limit <= _now()]
                # a request lost with a dropped connection, not a worker the shard waits for
                hint = self._came_back_hint(shards) or self._shorter_wait_hint(shards, limit, what)
                hint += self._handshakes.hint(shards) if self._handshakes else ""
                hint += unresolved_hint(shards, self.endpoints)
                named = self._named(shards, asked)
                raise SyncError(no_answer_text(self.rank, what, named, limit, self.timeout, hint))
            left = min(left, limit / LINK_READS, self._tell_silent(quiet, what, limit))
            if stoppable:
                left = min(left, self._stop_patience_left(quiet, what, asked))
            if self._shard_processes is not None:
                left = min(left, LOOK_EVERY)
                if self._shard_processes.look_due(_now()):  # no set built on every poll
                    self._refuse_ended_shards(missing, what)
            with waiting(self.rank, Wait(partial(self._awaited, tuple(quiet), what), start)):
                ready = self._poller.poll(min(left, LONGEST_POLL) * 1000)  # /healthz says so
            for sock, _ in ready:
                self._receive(sock)
            self._ask_again_if_lost(missing, what)  # a shard restarted never heard them

    def _error_reply(self, shard: int, what: str, header: dict[str, Any]) -> SyncError:
        """The error for ``shard``'s error reply ``header`` to a request of the wait for
        ``what`` (-1: the shard not known)."""
        where = "" if shard < 0 else f" {self.endpoints[shard]}"
        message = f"rank {self.rank}, {what}: pserver{where}: {header.get('error')}"
        return late_reply_error(message, header, self.rank)

    def _awaited(self, shards: Sequence[int], what: str) -> str:
        """``for pserver shard(s) 0 (host:port): step 199``: a wait, as ``/healthz`` says it."""
        return f"for pserver shard(s) {self._named(sorted(shards))}: {wait_words(what)}"

    def _heard(self, rids: Iterable[int], answered: dict, start: float) -> dict[int, float]:
        """The shards ``rids`` wait for, each with when it was last heard from: its latest reply
        (``answered``), the wait's ``start`` or its link's latest bytes (a push's reply too is
        large); where not known, one of the first two plus a large reply's at SLOW_LINK_BYTES."""
        heard: dict[int, float] = {}
        for r in rids:
            s, n = self._rid_shard.get(r, -1), self._rid_bytes.get(r, 0)
            heard[s] = max(heard.get(s, 0.0), n / SLOW_LINK_BYTES)  # the crossing's time
        for s, crossing in heard.items():
            idle = self._handshakes.idle(s) if self._handshakes else None
            last = answered.get(s, start)
            if idle is None:
                heard[s] = last + crossing
            else:  # the bytes of a reply to nothing awaited are no sign of life
                heard[s] = max(last, self._bytes_heard(s, _now() - idle, last))
        return heard

    def _stop_patience_left(self, quiet: dict[int, float], what: str, asked: str) -> float:
        """How long the next poll of a stoppable wait may take (:data:`POLL_SLICE` at most, to
        see a stop request soon); SyncError once a stop was requested and a shard it waits for
        has said nothing for the patience (:data:`STOP_PATIENCE`) since it, or since that
        shard's latest reply (``quiet``: shard -> that reply, or the wait's start)."""
        pending = stop_request.pending()
        if pending is None:
            return POLL_SLICE
        signum, since = pending
        patience = max(STOP_PATIENCE, QUIET_FACTOR * self._usual_quiet)
        silent = {s: _now() - max(t, since) for s, t in quiet.items()}
        if max(silent.values()) < patience:
            return min(POLL_SLICE, patience - max(silent.values()))
        raise SyncError(
            f"rank {self.rank}: asked to stop ({signum.name}), and pserver shard(s) "
            f"{self._named([s for s, q in silent.items() if q >= patience], asked)} gave no answer "
            f"to {what} in the {patience:.3g} s since: {given_up_after_stop(what)}"
        )

    def _refuse_ended_shards(self, missing: set[int], what: str) -> None:
        """SyncError naming a shard that ``missing`` replies wait for and whose process on this
        host has ended: a shard that is gone answers nothing."""
        waited = sorted({self._rid_shard.get(r, -1) for r in missing})  # -1: not known
        for s, pid in self._shard_processes.ended(waited):
            raise self._found_gone(
                s,
                f"is gone: its process (pid {pid}, on this host) ended (stopped, killed or "
                f"crashed) while {wait_words(what)} waited for it",
            )

    def _malformed(self, shard: int, problem: object) -> SyncError:
        """The error for a reply of ``shard`` this worker cannot read, naming the shard: one
        of several may speak another protocol (an old image, another service on its port)."""
        if (other := other_protocol(self.rank, self._named([shard]), problem)) is not None:
            return other  # a peer of another release: named as such, with the way on
        where = f"pserver shard {self._named([shard])}"
        return SyncError(f"rank {self.rank}: malformed reply from a pserver: {problem} ({where})")

    def _refuse_handshake(self, monitor: zmq.Socket) -> None:
        """SyncError naming the shard whose handshake ZeroMQ gave up on (``monitor`` reported
        it): that connection never carries a message, so waiting for it is waiting for nothing."""
        if (refused := self._handshakes.refused(monitor, self.rank, self.endpoints)) is not None:
            raise refused

    def _named(self, shards: Sequence[int], asked: str = "") -> str:
        """``shards`` as a message names them: ``0 (host:port), 1 (host:port)``, or with
        ``asked``, ``0 (host:port, asked for stats)``."""
        why = f", asked for {asked}" if asked else ""
        return ", ".join(f"{s} ({self.endpoints[s]}{why})" for s in shards if s >= 0) or "?"

    def _ask_all(
        self,
        headers: Sequence[tuple[int, dict[str, Any], Sequence[np.ndarray]]],
        what: str,
        stoppable: bool = False,
        asked: str = "",
        link_bytes: Sequence[int] = (),
    ) -> list[tuple[dict[str, Any], list]]:
        """Send each ``(shard, header, arrays)``; their replies (see :meth:`_arrivals`).
        ``link_bytes``: where known, the bytes that cross the shard's link before each reply
        is in (its own, and like replies to other workers asking at once), which the shard is
        given time to send (:data:`SLOW_LINK_BYTES`)."""
        rids = self._send_all(headers)
        self._rid_bytes.update(zip(rids, link_bytes))
        return self._wait(rids, what, stoppable, asked)

    def _send_all(self, headers: Sequence[tuple[int, dict[str, Any], Sequence]]) -> list[int]:
        """Send each ``(shard, header, arrays)``; their ids, for a wait (:meth:`_arrivals`)."""
        rids: list[int] = []
        try:
            for s, h, a in headers:
                rids.append(self._send(s, h, a))
        except BaseException:  # no wait follows: those sent would stay awaited for good
            self._drop_replies(set(rids))
            raise
        return rids


def _now() -> float:
    return time.monotonic()
