"""One parameter-server shard: a ROUTER socket, the blocks it holds, their optimizer state.

The shard knows no model. Worker 0 seeds it with its blocks (values, the optimizer's config);
then every worker pushes its gradient blocks, several parameters to a message when they come
together, and the reply to a push carries the blocks' new values.

- **sync**: the shard collects the gradients of all N workers for a parameter's step, sums
  them in rank order (bitwise reproducible), divides by the sum of their example counts and
  runs the optimizer once; a push is answered once every parameter it carries is updated.
- **async**: each parameter of a push is applied at once with the push's example count. One
  whose blocks have taken more than ``max_staleness`` updates since the worker last received
  them is dropped (counted in the stats, logged); the reply carries the current values.

Every wait has a timeout. A worker missing from a sync step (or a collective) past the timeout
fails the job: every later request gets the message naming the rank, its host and its last step.
Ranks held at points of the job that can never meet (:mod:`~distconv.sync.ps.stuck`) fail it at
once, naming where each rank is.
A malformed request gets an error reply (or is dropped and logged when it cannot be answered) and
the shard goes on serving everyone else.
"""

from __future__ import annotations

import itertools
import logging
import signal
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import zmq

from distconv.allocator import keep_freed_memory
from distconv.endpoint import split_endpoint
from distconv.kernels.parallel import blas_libraries
from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.async_updates import AsyncUpdates, staleness_counts
from distconv.sync.ps.bound_address import bound_address
from distconv.sync.ps.config import (
    ShardConfig,
    listening_fd,
    tcp_url,
    uses_ipv6,
)
from distconv.sync.ps.drain import Draining
from distconv.sync.ps.gathers import ShardGathers
from distconv.sync.ps.handlers import RequestHandlers
from distconv.sync.ps.job_state import JobState
from distconv.sync.ps.losses import WorkerLosses
from distconv.sync.ps.parts import CheckpointParts
from distconv.sync.ps.processes import whoami
from distconv.sync.ps.refused_peers import RefusedConnections
from distconv.sync.ps.releases import FEATURES
from distconv.sync.ps.request_log import RefusalLog
from distconv.sync.ps.runs import RunChecks
from distconv.sync.ps.shard_monitor import ShardMonitor
from distconv.sync.ps.state import BlockUpdates, Stats
from distconv.sync.ps.stats_line import StatsLine
from distconv.sync.ps.wire import frame_limit, pack, send, zmq_max_msg_size

log = logging.getLogger("distconv.pserver")

#: how often the loop wakes to check timeouts when no message arrives, in seconds
TICK = 0.1
#: the most requests handled in a row before the timeouts and probes are looked at
BATCH = 64
#: how often the stats line is due, in seconds: logged where a counter moved (stats_line.py)
STATS_EVERY = 30.0


class Shard(
    RequestHandlers,
    JobState,
    ShardGathers,
    RunChecks,
    WorkerLosses,
    AsyncUpdates,
    BlockUpdates,
    CheckpointParts,
    Draining,
):
    """A parameter-server shard.

    Args:
        config: the shard's settings (checked here).

    Attributes:
        endpoint: ``host:port`` actually bound, after :meth:`bind`.
        stats: counters reported on request, in the log and on the probes' /metrics.
    """

    def __init__(self, config: ShardConfig) -> None:
        config.check()
        self.config = config
        self.stats = Stats(updates_by_staleness=staleness_counts(config))
        self.endpoint = ""
        self._clear_job()  # (job_state.py)
        self.whereabouts = whoami()  # this shard's, told to its workers
        self.refusals = RefusalLog(config.shard)
        self.refused = RefusedConnections(self.refusals)  # logged and counted, any thread
        #: requests handled so far: when each hello, bye and held request came (the maps
        #: of :meth:`_clear_job` hold these counts)
        self.requests = 0
        self._stop = False
        self._stats_line = StatsLine(config.shard)
        Draining.__init__(self)
        #: probes (``distconv.service.ServiceEndpoints``), set by :func:`run_shard`, and the
        #: stats' copies for their /metrics (``distconv.sync.ps.stats_series``)
        self.service: Any = None
        self.exported: Any = None
        self._ctx = zmq.Context()
        self._auth = None
        self._key_rank: dict[bytes, int] = {}
        self._monitor: ShardMonitor | None = None  # its failed handshakes, once bound
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.linger = 0
        # ZeroMQ's limit is per frame: it closes a connection whose frame is larger before
        # buffering it; a message of many frames is buffered whole, whatever the cap says
        bound = zmq_max_msg_size(
            config.max_message_bytes, config.max_frame_bytes, curve=not config.insecure
        )
        self._sock.setsockopt(zmq.MAXMSGSIZE, bound)
        # no bound on the replies queued for a peer: at ZeroMQ's default (1000 a peer) a ROUTER
        # drops, without a word, a reply to a peer that has not read that many, and a worker
        # with more pushes in flight waited out its timeout for replies the shard had sent;
        # what stays queued is what that peer asked for
        self._sock.setsockopt(zmq.SNDHWM, 0)

    # -- lifecycle ----------------------------------------------------------------------------
    def bind(self) -> str:
        """Set up CURVE (unless insecure) and bind to the configured interface only; returns
        the endpoint bound. ``--checkpoint-dir`` is made at the first part (:meth:`save_part`)."""
        host, port = split_endpoint(self.config.bind)
        if self.config.insecure:
            log.warning("shard %d: --insecure: no encryption, no authentication", self.index)
        else:
            public, secret, workers = keyfiles.server_keys(self.config.keys_dir)
            self._key_rank = workers
            self._auth = keyfiles.start_authenticator(
                self._ctx, set(workers), self.refused.foreign_key
            )
            keyfiles.curve_server(self._sock, public, secret)
        self._monitor = ShardMonitor(self._sock, self.refused)
        self._sock.setsockopt(zmq.IPV6, uses_ipv6(host))  # [::] then takes IPv4 peers too
        if self.config.bind_fd is not None:  # the launcher's socket on that port: serve on it
            self._sock.setsockopt(zmq.USE_FD, listening_fd(self.config.bind_fd, host, port))
        try:
            self._sock.bind(tcp_url(host, port or "*"))  # *: a port the OS picks
        except zmq.ZMQError as exc:  # address in use, no such interface: the user can fix it
            raise OSError(f"cannot bind {self.config.bind}: {exc}") from None
        bound, _, port = self._sock.last_endpoint.decode().removeprefix("tcp://").rpartition(":")
        # eth0, a name that is loopback, 0.0.0.0: what a worker can dial, and from where
        address = bound_address(host, bound.strip("[]"), int(port))
        self.endpoint = address.endpoint
        log.info(
            "shard %d/%d listening on %s (%s mode, %d workers, %s)",
            self.index,
            self.config.num_shards,
            self.endpoint,
            self.config.mode,
            self.config.workers,
            "insecure" if self.config.insecure else "CURVE",
        )
        if address.warning:
            log.warning("shard %d: %s", self.index, address.warning)
        if address.reach:  # 0.0.0.0 is no address another host dials
            log.info("shard %d: on every interface; workers dial %s", self.index, address.reach)
        return self.endpoint

    @property
    def index(self) -> int:
        return self.config.shard

    def _settings(self) -> dict[str, Any]:
        """What a ``hello`` and a ``stats`` reply tell of this shard (docs/protocol.md)."""
        c = self.config
        return {
            "shard": c.shard,
            "num_shards": c.num_shards,
            "workers": c.workers,
            "mode": c.mode,
            "max_staleness": c.max_staleness,
            "checkpoints": bool(c.checkpoint_dir),
            "max_message_bytes": c.max_message_bytes,
            "max_frame_bytes": frame_limit(c.max_message_bytes, c.max_frame_bytes),
            "timeout": c.timeout,
            "features": list(FEATURES),  # what it can do beyond its protocol version
            **self.whereabouts,  # host and process (a worker beside it sees it end), build
        }

    def stop(self) -> None:
        """Ask :meth:`serve` to return after the current message (signal-safe)."""
        self._stop = True

    def serve(self) -> None:
        """Answer requests until :meth:`stop`; write a checkpoint part on the way out.

        Raises:
            CheckpointError: the part on the way out is refused for what it holds (a count
                that is no count); the shard's stats are logged first.
        """
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        if self._monitor is not None:
            poller.register(self._monitor.socket, zmq.POLLIN)
        next_stats = time.monotonic() + STATS_EVERY
        while not self._stop:
            if ready := dict(poller.poll(TICK * 1000)):
                if self._monitor is not None and self._monitor.socket in ready:
                    self._monitor.read()
                self._drain()
            now = time.monotonic()
            if self.draining and self.drained(now):
                break
            self._check_timeouts(now)
            self._report_probes()
            if now >= next_stats:
                self._stats_line.log_if_news(self.stats, now)
                next_stats = now + STATS_EVERY
        try:  # a refused part still raises (the exit says so), after the stats
            if self.config.checkpoint_dir and self.blocks:
                self._save_last_part()
        finally:
            self.log_stats()

    def _save_last_part(self) -> None:
        """The ``steplast`` part, on the way out. One the disk cannot take (full, read-only) is
        a warning, as a plot's is: parts are never read back, the job's checkpoints hold all a
        resume needs, and a job that ended well ended on an error line, a shard's exit 1. One
        refused for what it holds (a count that is no count: a shard bug) still raises."""
        from distconv.checkpoint import CheckpointError

        try:
            log.info("shard %d: wrote %s on shutdown", self.index, self.save_part("last"))
        except CheckpointError as exc:  # the disk's: nothing a resume reads is lost
            if self._bad_counts():  # refused for what it holds (a shard bug): the exit says so
                raise
            log.warning(
                "shard %d: %s; the job's checkpoints hold all a resume needs (a shard's parts "
                "are never read back)",
                self.index,
                exc,
            )

    def _drain(self, until: float = 0.0) -> None:
        """Handle the requests already queued, up to ``BATCH``, or all that are there before the
        monotonic time ``until``, without a poll for each (the timeouts and probes are looked at
        between batches)."""
        for handled in itertools.count():
            if handled >= BATCH and time.monotonic() >= until:
                return
            try:
                frames = self._sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            self.handle(frames)

    def _report_probes(self) -> None:
        """Ready once seeded (or restored); a beat per loop turn, with the last step updated,
        so ``/healthz`` turns 503 when the loop hangs; once the job has failed, 503 at once,
        naming the cause (the loop is fine then: a stall would send the reader astray)."""
        if self.service is None:
            return
        if self.exported is not None:  # a scrape waits for this turn's copy of the stats
            self.exported.turn()
        if self.service.ready != bool(self.blocks):
            self.service.set_ready(bool(self.blocks))
        # the loop turns, failed or not (the failure is told apart), and the steps applied in
        # the batch that failed the job count too
        self.service.beat(self.top_step if self.top_step >= 0 else None)
        if self.top_step < 0:  # none since the seed: not the run before's either
            self.service.forget_step()
        if self.failed and self.service.failure is None:
            self.service.set_failed(f"job failed: {self.failed}")

    def close(self) -> None:
        """Release the socket (its last replies kept a moment where they tell of the shard's
        own stop: :meth:`closing_linger_ms`), its monitor, the authenticator and the context."""
        if self._monitor is not None:  # once: a shard may be closed again (a test's, after)
            self._monitor.close()
            self._monitor = None
        self._sock.close(self.closing_linger_ms())
        if self._auth is not None:
            self._auth.stop()
        self._ctx.term()

    def log_stats(self) -> None:
        self._stats_line.log(self.stats)

    def _reply(
        self,
        ident: bytes,
        request: dict[str, Any],
        arrays: Sequence[np.ndarray] = (),
        error: str | None = None,
        **fields: Any,
    ) -> None:
        header = {"op": "error" if error else "ok", "id": request.get("id", -1), **fields}
        if error:
            header["error"] = error
            if error == self.failed:  # a held request dismissed, or a later one refused
                self.note_told(request)
        else:  # a draining shard asks its workers for their checkpointed stop (drain.py)
            header.update(self.stop_ask_fields())
        frames = pack(header, arrays)
        self.stats.bytes_out += len(frames[0]) + sum(a.nbytes for a in arrays)
        # copied into ZeroMQ's own message: the reply keeps the values of now (why not lent:
        # distconv.sync.ps.values)
        send(self._sock, frames, prefix=(ident,), copy=True)

    # -- collectives and housekeeping ---------------------------------------------------------
    def _live(self) -> set[int]:
        return set(range(self.config.workers)) - self.lost

    def _fail(self, message: str, ranks: Iterable[int] = (), **fields: Any) -> None:
        """The job cannot go on: answer everything held and everything later with ``message``;
        ``ranks``: the workers whose failure it is (one that closed on an error, or went silent
        for the timeout), named in the replies' ``failed_ranks`` (none: the shard's own);
        ``fields``: the replies' others (``refused``: the ranks run different jobs;
        ``stopped_shard``: this shard's own stop, :mod:`~distconv.sync.ps.drain`)."""
        if self.failed:
            return
        self.failed, self.failed_ranks = message, sorted(set(ranks))
        self.failed_fields = fields
        log.error("shard %d: job failed: %s", self.index, message)
        try:
            held = [e for w in self.waiting.values() for e in w.by_rank.values()]
            self._dismiss(held, message, **self._failed_fields())
        finally:
            self.waiting.clear()
            self.gathers_held.clear()

    def _failed_fields(self) -> dict[str, Any]:
        """The failed job's reply fields besides its message (``docs/protocol.md``)."""
        ranks = {"failed_ranks": self.failed_ranks} if self.failed_ranks else {}
        return {**ranks, **self.failed_fields}

    def _dismiss(
        self, held: Iterable[tuple[bytes, dict[str, Any], Any]], why: str, **fields: Any
    ) -> None:
        """Answer each request in ``held`` (``_Waiting.by_rank`` values), which the shard no
        longer holds, with the error ``why``: its worker stops now, naming the cause, instead
        of at its timeout. A push of several parameters, held under each, is answered once.
        Each counts in ``errors``, as :meth:`handle`'s do."""
        answered: set[int] = set()
        for ident, header, _ in held:
            if id(header) in answered:
                continue
            answered.add(id(header))
            self.stats.errors += 1
            try:
                self._reply(ident, header, error=why, **fields)
            except Exception:  # one reply that cannot go must not keep the rest
                log.exception("shard %d: could not answer a dropped request", self.index)


def run_shard(config: ShardConfig, service: Any = None) -> int:
    """Run one shard until SIGINT, or SIGTERM and its workers' ``bye`` (:meth:`Shard.drain`);
    prints ``listening on HOST:PORT`` once bound.

    Args:
        config: the shard's settings.
        service: optional :class:`~distconv.service.ServiceEndpoints`, already serving; the
            loop marks it ready once seeded and beats it while healthy.
    """
    keep_freed_memory()  # every request's blocks reuse the last one's buffers, without faults
    for lib in blas_libraries():  # a shard multiplies no matrices: BLAS runs only its NaN check
        lib.set_num_threads(1)  # (all_finite), which a pool's wake-ups would make slower
    shard = Shard(config)
    shard.service = service
    try:
        endpoint = shard.bind()
        if service is not None:  # prometheus_client, imported where a shard serves probes
            from distconv.sync.ps.stats_series import export_stats

            refused = shard.refused  # its count read at each copy of the stats
            shard.exported = export_stats(shard.stats, config, service, lambda: refused.count)
        # before the line that says it is up; SIGTERM drains, SIGINT (Ctrl-C) stops at once
        signal.signal(signal.SIGTERM, lambda *_: shard.drain())
        signal.signal(signal.SIGINT, lambda *_: shard.stop())
        print(f"pserver shard {config.shard} listening on {endpoint}", flush=True)
        shard.serve()
    finally:
        if shard.exported is not None:  # what the loop counted last; no scrape waits for it
            shard.exported.close()
        shard.close()
    return 0
