"""Probes and metrics for a worker or a shard: ``/readyz``, ``/healthz`` and ``/metrics``.

Kubernetes (or anyone with ``curl``) asks three questions of a running rank:

- ``/readyz``: 200 once :meth:`ServiceEndpoints.set_ready` was called (the sync strategy has
  seeded or received the parameters), 503 before.
- ``/healthz``: 200 while steps progress; 503 when no :meth:`~ServiceEndpoints.beat` came for
  ``stall_seconds`` (counted from :meth:`~ServiceEndpoints.start` until the first beat), so a
  rank stuck in a collective gets restarted by its liveness probe; 503 at once, and for good,
  after :meth:`~ServiceEndpoints.set_failed` (a shard whose job failed), the body saying why.
- ``/metrics``: the Prometheus text format, written by the official client from a registry
  private to this instance, every series labelled with ``role`` and ``rank``: a worker's steps
  and traffic (:mod:`distconv.probe_series`); a shard's readiness and step, beside its stats
  (:mod:`distconv.sync.ps.stats_series`, on :attr:`ServiceEndpoints.registry`).

The server (:mod:`distconv.probe_http`) is the standard library's threading HTTP server on a
daemon thread (an IPv6 literal host binds IPv6), serving at most 32 connections at once, each
with 10 s to send its request: it costs nothing while nobody asks, and the training thread only
ever touches plain attributes and the client's thread-safe metric objects.

Example::

    service = ServiceEndpoints(role="worker", rank=runtime.rank)
    port = service.start(host=args.health_host, port=args.health_port)
    ...  # setup() seeds or receives the parameters
    service.set_ready()
    for step in ...:
        service.observe_step(seconds, samples, step)  # a beat naming the step
"""

from __future__ import annotations

import errno
import math
import socket
import threading
import time
from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from distconv.endpoint import join_endpoint
from distconv.probe_http import ProbeHTTPServer, handler_for
from distconv.probe_series import NO_STEP, RankSeries
from distconv.rank_waits import current as current_wait


def plain_os_error(code: int | None, message: str) -> OSError:
    """An ``OSError`` that reads ``message`` alone and keeps ``errno`` ``code`` for code that
    asks: ``OSError(code, message)`` reads ``[Errno 98] message``, and a user's one error line
    (``distconv train: error: ...``) began with the number."""
    error = OSError(message)
    error.errno = code
    return error


def _bind_error(
    code: int | None, host: str, port: int, cause: str, flag: str | None, port_from: str | None
) -> OSError:
    """Why the probes cannot serve on ``host:port``, naming ``flag`` (None: no flag is at
    fault), as a shard's ``cannot bind HOST:PORT: ...`` does; then, where the port is at
    fault, ``(port_from)`` where it was not the one typed, and where another process holds it,
    the way out (:data:`ANY_FREE_PORT`)."""
    where = join_endpoint(host.strip("[]"), port)  # [fe80::1]:0, not fe80::1:0
    said = f"cannot bind probes and metrics on {where}: {cause}"
    if flag is not None:
        said = f"{flag}: {said}"
    notes = []
    if flag == "--health-port":  # not beside a --health-host at fault
        notes += [port_from] if port_from else []
        notes += [ANY_FREE_PORT] if code == errno.EADDRINUSE else []
    return plain_os_error(code, f"{said} ({'; '.join(notes)})" if notes else said)


#: the way out of a ``--health-port`` in use: a sweep passes every job the same flags, so the
#: second job on a host met the first's port
ANY_FREE_PORT = "another job on this host? --health-port 0 takes any free port"


#: the bind errors that are the port's: taken, or privileged (below 1024, without the right)
_PORT_ERRORS = (errno.EADDRINUSE, errno.EACCES)
#: the errors that are no flag's: this process or host is out of files, buffers or memory
_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
#: the resolver's errors (``socket.gaierror``) that are no flag's: out of memory as it looked
#: the host up (out of files, it says ``EAI_SYSTEM``, which Python raises as the plain
#: ``OSError`` of its errno: one of :data:`_RESOURCE_ERRORS`)
_RESOLVER_RESOURCE_ERRORS = (socket.EAI_MEMORY,)
#: what a temporary resolver failure (``EAI_AGAIN``: no DNS server answered now) adds to its
#: ``Temporary failure in name resolution``: the host may be right, so no flag is named
_RESOLVER_AGAIN = (
    "the host name could not be looked up now, which says nothing of whether it is right; "
    "retry once name resolution (DNS) answers"
)


def _flag_at_fault(exc: OSError) -> str | None:
    """The flag to change for a bind that failed: --health-port where the port is taken or
    privileged; none where a resource ran out (no other host or port would help); else
    --health-host: an address that is none of this host's, of a family it lacks (IPv6 in a
    container without it), link-local without its interface (``fe80::1``: EINVAL, with any
    port), or a name it cannot look up; none where the resolver failed for now (``EAI_AGAIN``)."""
    if isinstance(exc, socket.gaierror):  # its errno is the resolver's (negative), no OS one
        no_flag = (*_RESOLVER_RESOURCE_ERRORS, socket.EAI_AGAIN)
        return None if exc.errno in no_flag else "--health-host"
    if exc.errno in _PORT_ERRORS:
        return "--health-port"
    if exc.errno in _RESOURCE_ERRORS:
        return None
    return "--health-host"


class ServiceEndpoints:
    """``/readyz``, ``/healthz`` and ``/metrics`` for one rank, served on a daemon thread.

    Args:
        role: ``"worker"`` or ``"server"`` (any non-empty label is accepted).
        rank: this rank (a shard's index for a server), ``>= 0``.
        stall_seconds: ``/healthz`` answers 503 after this long without a beat.
        registry: where the metrics live; a fresh private ``CollectorRegistry`` by default, so
            two instances in one process never collide.
        worker_series: serve a worker's series (its steps, traffic, waits, restarts); False:
            ``distconv_ready`` and ``distconv_step`` alone (a shard's), and the methods that
            count a worker's refuse with a ``RuntimeError``.

    Raises:
        ValueError: a label is empty, the rank negative, or ``stall_seconds`` not positive.
    """

    def __init__(
        self,
        role: str = "worker",
        rank: int = 0,
        stall_seconds: float = 300.0,
        registry: CollectorRegistry | None = None,
        *,
        worker_series: bool = True,
    ) -> None:
        if not isinstance(role, str) or not role.strip():
            raise ValueError(f"role must be a non-empty string, got {role!r}")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"rank must be an integer >= 0, got {rank!r}")
        if not (isinstance(stall_seconds, (int, float)) and math.isfinite(stall_seconds)):
            raise ValueError(f"stall_seconds must be a finite number, got {stall_seconds!r}")
        if stall_seconds <= 0:
            raise ValueError(f"stall_seconds must be > 0, got {stall_seconds}")
        self.role, self.rank = role, rank
        self.stall_seconds = float(stall_seconds)
        self.registry = registry if registry is not None else CollectorRegistry()
        self._metrics = RankSeries(self.registry, role, rank, worker=worker_series)
        self._ready = False
        self._last_beat = time.monotonic()
        self._last_step: int | None = None
        self._failure: str | None = None
        self._server: ProbeHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._totals: dict[int, dict[str, float]] = {}  # by id() of the strategy

    # -- serving ------------------------------------------------------------------------------

    def start(self, host: str = "127.0.0.1", port: int = 0, *, port_from: str | None = None) -> int:
        """Serve on ``host:port`` (0: a free port) from a daemon thread; return the bound port.
        ``port_from`` says how ``port`` came from the one typed (a rank's ``--health-port P +
        local rank R``): an error that blames the port says it after the cause.

        The stall clock starts here, so a rank that never reaches its first step also turns
        unhealthy after ``stall_seconds``.

        Raises:
            RuntimeError: already started.
            OSError: the address cannot be bound (in use, not local).
        """
        if self._server is not None:
            raise RuntimeError(
                f"service endpoints already serve on port {self._server.server_address[1]}"
            )
        if not 0 <= port <= 65535:  # bind() raises an OverflowError that names no flag
            cause = "a port is 0..65535"
            raise _bind_error(errno.EINVAL, host, port, cause, "--health-port", port_from)
        try:
            server = ProbeHTTPServer((host.strip("[]"), port), handler_for(self))
        except OSError as exc:  # "Address already in use" alone names no port
            cause, flag = exc.strerror or str(exc), _flag_at_fault(exc)
            if isinstance(exc, socket.gaierror) and exc.errno == socket.EAI_AGAIN:
                cause = f"{cause} ({_RESOLVER_AGAIN})"
            raise _bind_error(exc.errno, host, port, cause, flag, port_from) from None
        self._server = server
        self._last_beat = time.monotonic()
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name=f"distconv-service-{self.role}-{self.rank}",
            daemon=True,
        )
        self._thread.start()
        return int(server.server_address[1])

    def close(self) -> None:
        """Stop serving, release the port, hang up on open connections; safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> ServiceEndpoints:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- state the probes report ---------------------------------------------------------------

    def set_ready(self, ready: bool = True) -> None:
        """``/readyz`` answers 200 from now on (or 503 again with ``ready=False``)."""
        self._ready = bool(ready)
        self._metrics.ready.set(1.0 if self._ready else 0.0)

    def beat(self, step: int | None = None) -> None:
        """Record progress: step ``step`` finished (None: alive, but no step to name, as a
        shard's loop before its first update), so the rank is healthy for another while."""
        self._last_beat = time.monotonic()
        if step is not None:
            self._last_step = int(step)
            self._metrics.step.set(self._last_step)

    def forget_step(self) -> None:
        """No step finished yet (``last step none yet``): a shard re-seeded by a resumed run,
        whose steps may start below the run before's; ``distconv_step`` says -1 again."""
        self._last_step = None
        self._metrics.step.set(NO_STEP)

    def set_failed(self, message: str) -> None:
        """The rank cannot go on (its job failed): ``/healthz`` answers 503 from now on, at
        once rather than after ``stall_seconds``, naming ``message`` instead of a stall. The
        kubelet still waits for its probe's ``failureThreshold`` before it restarts the pod.

        Raises:
            ValueError: ``message`` is empty.
        """
        if not isinstance(message, str) or not message.strip():
            raise ValueError(f"message must be a non-empty string, got {message!r}")
        self._failure = message

    @property
    def failure(self) -> str | None:
        """What :meth:`set_failed` was told, or None."""
        return self._failure

    @property
    def ready(self) -> bool:
        """What ``/readyz`` says."""
        return self._ready

    @property
    def healthy(self) -> bool:
        """What ``/healthz`` says: not failed, and a beat came within the last ``stall_seconds``."""
        return self._failure is None and self._seconds_since_beat() <= self.stall_seconds

    def _seconds_since_beat(self) -> float:
        return time.monotonic() - self._last_beat

    def _health_text(self) -> str:
        quiet = self._seconds_since_beat()
        last = "none yet" if self._last_step is None else str(self._last_step)
        if self._failure is not None:  # the loop may still beat: how long ago says nothing
            return f"failed: {self.role} {self.rank}, last step {last}: {self._failure}\n"
        state = "ok" if quiet <= self.stall_seconds else "stalled"
        return (
            f"{state}: {self.role} {self.rank}, last step {last}, {quiet:.1f} s ago "
            f"(limit {self.stall_seconds:g} s){self._waiting_text(state)}\n"
        )

    def _waiting_text(self, state: str) -> str:
        """``; waiting 7.9 s for pserver shard(s) 0: step 199`` where a stalled worker waits
        for a peer (:mod:`distconv.rank_waits`): the straggler may be that peer, not this rank."""
        wait = current_wait(self.rank) if state == "stalled" and self.role == "worker" else None
        return "" if wait is None else f"; {wait.text()}"

    # -- metrics -------------------------------------------------------------------------------

    def _worker(self) -> RankSeries:
        """The worker's series, which the counting methods below set; refused where they are
        not served (``worker_series=False``): a count made there would be lost unseen."""
        if not self._metrics.worker:
            raise RuntimeError(
                f"{self.role} {self.rank}'s endpoints serve no worker series (worker_series=False)"
            )
        return self._metrics

    def observe_step(self, seconds: float, samples: int, step: int | None = None) -> None:
        """One step took ``seconds`` for ``samples`` examples here; a beat with ``step`` (the
        step just finished, which ``/healthz`` and ``distconv_step`` name)."""
        if seconds < 0 or samples < 0:
            raise ValueError(f"seconds and samples must be >= 0, got {seconds} and {samples}")
        m = self._worker()
        m.step_seconds.observe(seconds)
        m.samples.inc(samples)
        if seconds > 0:
            m.samples_per_second.set(samples / seconds)
        self.beat(step)

    def add_bytes(self, pushed: int = 0, pulled: int = 0) -> None:
        """Count payload bytes sent to and received from peers."""
        if pushed < 0 or pulled < 0:
            raise ValueError(f"byte counts must be >= 0, got pushed={pushed}, pulled={pulled}")
        m = self._worker()
        m.bytes_pushed.inc(pushed)
        m.bytes_pulled.inc(pulled)

    def observe_allreduce(self, seconds: float) -> None:
        """One allreduce (or the wait for it) took ``seconds``."""
        if seconds < 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        self._worker().allreduce_seconds.observe(seconds)

    def add_stale_dropped(self, n: int = 1) -> None:
        """``n`` gradients were dropped as too stale."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        self._worker().stale_dropped.inc(n)

    def add_push_messages(self, applied: int = 0, dropped: int = 0) -> None:
        """``applied`` asynchronous push messages were applied, ``dropped`` dropped whole."""
        if applied < 0 or dropped < 0:
            raise ValueError(f"push counts must be >= 0, got {applied} and {dropped}")
        m = self._worker()
        m.push_messages_applied.inc(applied)
        m.push_messages_dropped.inc(dropped)

    def add_collective_seconds(self, seconds: float) -> None:
        """``seconds`` more were waited in the Trainer's collectives outside the steps' exchange."""
        if not seconds >= 0:
            raise ValueError(f"seconds must be >= 0, got {seconds}")
        self._worker().collective_seconds.inc(seconds)

    def record_totals(self, totals: Mapping[str, float], source: object = None) -> None:
        """Count what a sync strategy's running totals (``SyncStrategy.traffic()``) added since
        the last call for the same ``source`` (the strategy; a new Trainer on this monitor may
        bring another): ``bytes_pushed``, ``bytes_pulled``, ``sync_seconds``, ``stale_dropped``,
        ``push_messages_applied``, ``push_messages_dropped``, ``collective_seconds``.

        A source not seen before is counted from 0, and so are all totals of one whose totals
        dropped (a new strategy where an old one was, or no source given): the counters go on
        upwards."""
        self._worker()  # before anything is remembered
        last = self._totals.get(id(source), {})
        if any(v < last.get(k, 0.0) for k, v in totals.items()):
            last = {}
        self._totals[id(source)] = dict(totals)
        delta = {k: v - last.get(k, 0.0) for k, v in totals.items()}
        self.add_bytes(int(delta.get("bytes_pushed", 0)), int(delta.get("bytes_pulled", 0)))
        if delta.get("sync_seconds", 0.0) > 0:  # none at an epoch's end: no step to observe
            self.observe_allreduce(delta["sync_seconds"])
        self.add_stale_dropped(int(delta.get("stale_dropped", 0)))
        pushes = (int(delta.get(f"push_messages_{k}", 0)) for k in ("applied", "dropped"))
        self.add_push_messages(*pushes)
        self.add_collective_seconds(delta.get("collective_seconds", 0.0))

    def set_restarts(self, n: int) -> None:
        """The job has been restarted ``n`` times (the launcher's ``DISTCONV_RESTART``)."""
        if n < 0:
            raise ValueError(f"restarts must be >= 0, got {n}")
        self._worker().restarts.set(n)
