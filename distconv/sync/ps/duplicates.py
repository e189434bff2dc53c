"""A second worker that claims a rank whose worker still runs: refused, the job left alone.

A rank's hello of a new run ends the seeded run its worker of now is in, taken as a restart of
that worker (:meth:`~distconv.sync.ps.runs.RunChecks._end_run_before`). A new run id alone
cannot tell a restart from a second process started with the same ``--rank`` (a worker's
command run twice by mistake, another experiment's worker given this job's shards): taken so,
it ended a job that was training, telling every worker that a rank had been "killed or
crashed". What tells them apart is whether the rank's worker of now still lives:

- its process, where this shard follows it (the same host: :mod:`~.processes`), is looked up
  at once: running, the newcomer is refused; ended, it is a restart, taken at once (a worker
  killed and restarted within a second is still told from a copy);
- elsewhere, its connections: a process that ends, killed or not, closes them, and the shard's
  side of each closes with it, at once. Where every connection the worker was heard on is
  closed, it is a restart, taken at once;
- else a worker is alive while it is heard: in sync mode it pushes every step, in async mode
  it beats four times a timeout. A newcomer whose rank's worker was heard within
  :func:`heard_within` is held, unanswered: refused as soon as that worker speaks again, taken
  as a restart once it has been silent that long (or has said bye, or its connections closed).
  A worker whose host went down (its connections never closed) is so told from a copy at
  most that window after its last request.

Only hellos that name their process (every ``distconv`` worker's do) and a process other than
the rank's worker of now are so weighed: a new run of the same process (a script that made a
new sync object) is that process's own choice, and a hello that names none is taken as before.
A refused newcomer is not the rank's refused hello either: its ``bye`` closes nothing.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import zmq

from distconv.messages import named
from distconv.sync.ps.beats import BEATS_PER_TIMEOUT, INTERVAL_BOUNDS
from distconv.sync.ps.links import ends_of
from distconv.sync.ps.processes import WORKER_STOPPED, ProcessWatch
from distconv.sync.ps.state import _Refused
from distconv.sync.ps.wire import WireError

log = logging.getLogger("distconv.pserver")

#: the most connections noted per rank (a request socket per shard's worker, a heartbeat's,
#: and their reconnections): past it, those found closed are dropped first
MAX_LINKS = 16
#: a connection's descriptor on the shard's side, and its both ends as it was first heard on
#: (a closed one's descriptor may be reused by another connection: the ends tell them apart)
Links = dict[int, "tuple[object, object] | None"]

#: how many beat intervals a rank's worker may be silent and still count as alive: a beat's
#: timing jitters (the worker's GIL, its thread's start), and sync pushes come at least as often
HEARD_BEATS = 1.5


def heard_within(timeout: float) -> float:
    """Seconds within which a live worker of a shard of ``timeout`` is heard: the interval of
    its heartbeat (:func:`~distconv.sync.ps.beats.beat_interval`), with room to spare."""
    low, high = INTERVAL_BOUNDS
    return HEARD_BEATS * min(max(timeout / BEATS_PER_TIMEOUT, low), high)


@dataclass
class HeldHello:
    """A newcomer's hello, held until its rank's worker of now speaks or stays silent."""

    ident: bytes
    header: dict[str, Any]
    arrays: list
    #: when the rank's worker of now was last heard, as the hello arrived (monotonic)
    seen: float


class DuplicateHellos:
    """The duplicate side of :class:`~distconv.sync.ps.server.Shard` (whose state it shares)."""

    index: int
    config: Any
    stats: Any
    processes: ProcessWatch
    failed: str | None
    requests: int
    left: set[int]
    run_of: dict[int, int | None]
    last_seen: dict[int, float]
    #: per rank, the shard's count of requests when its worker of now was last heard
    heard_at: dict[int, int]
    #: per rank, the ``process`` its latest accepted hello named ("" where none)
    process_of: dict[int, str]
    #: per rank, a newcomer's hello held (:meth:`_hold_if_claimed`)
    held_hellos: dict[int, HeldHello]
    #: per rank, the connections its worker of now was heard on
    links_of: dict[int, Links]
    #: the header of the held hello being taken now (:meth:`_take_held`): decided already
    _taking: dict[str, Any] | None = None

    def _note_link(self, header: dict[str, Any], frame: zmq.Frame) -> None:
        """Note the connection a request of its rank's worker of now came on (``frame``:
        one of the request's, which ZeroMQ marks with the descriptor it was read from)."""
        if header.get("op") == "stats" or not self._of_current_run(header):
            return
        try:
            fd = frame.get(zmq.SRCFD)
        except zmq.ZMQError:  # a ZeroMQ without it: the other signs decide
            return
        links = self.links_of.setdefault(header["rank"], {})
        if fd < 0 or fd in links:
            return
        if len(links) >= MAX_LINKS:
            for closed in [f for f, ends in links.items() if ends_of(f) != ends]:
                del links[closed]
        if len(links) < MAX_LINKS:
            links[fd] = ends_of(fd)

    def _links_closed(self, rank: int) -> bool:
        """Whether every connection ``rank``'s worker of now was heard on has closed (one
        whose ends could not be read says nothing)."""
        links = self.links_of.get(rank)
        return bool(links) and all(
            ends is not None and ends_of(fd) != ends for fd, ends in links.items()
        )

    def _hold_if_claimed(self, ident: bytes, header: dict[str, Any], arrays: list) -> bool:
        """Whether ``header``'s hello, which would end the rank's run, is held: another process
        claims a rank whose worker was heard within :func:`heard_within`. Refuse it at once
        where that worker's process is seen running here.

        Raises:
            _Refused: the rank's worker of now runs on this host.
        """
        rank = header["rank"]
        if header is self._taking or not self._would_end_run(rank, header.get("run")):
            return False
        process, before = header.get("process"), self.process_of.get(rank)
        if not process or not before or process == before:
            return False
        alive = self.processes.alive(rank)
        if alive is not None:
            if alive:
                raise self._claimed(rank)
            return False  # its process ended: a restart
        if self._links_closed(rank):
            return False  # so did its connections: a restart
        seen = self.last_seen.get(rank)
        if seen is None or time.monotonic() - seen > heard_within(self.config.timeout):
            return False
        self._refuse_held_hello(rank)  # a third process: the earlier newcomer is refused
        self.held_hellos[rank] = HeldHello(ident, header, arrays, seen)
        log.info(
            "shard %d: rank %d's hello from host %s held: its worker of now was heard %.1f s "
            "ago (a restart, or a second copy of its command?)",
            *(self.index, rank, header.get("host"), time.monotonic() - seen),
        )
        return True

    def _alive_since(self, rank: int, when: int) -> bool:
        """Whether ``rank``'s worker of now was heard since the request counted ``when`` (a
        request is noted heard before it is counted, so one heard after it has ``when`` at
        least), or its process runs on this host now."""
        return self.heard_at.get(rank, -1) >= when or bool(self.processes.alive(rank))

    def _refuse_held_hello(self, rank: int) -> None:
        """Refuse ``rank``'s held hello, if any: its worker of now spoke since."""
        held = self.held_hellos.pop(rank, None)
        if held is not None:
            refused = self._claimed(rank)
            log.warning("shard %d: a hello refused: %s", self.index, refused)
            self._reply(held.ident, held.header, error=str(refused))

    def _claimed(self, rank: int) -> _Refused:
        """The refusal of a newcomer's hello for ``rank``, naming the worker that holds it: its
        pid where this shard follows it, and the way out where its process is stopped (a
        debugger, Ctrl-Z: silent, so the newcomer looks like its restart, which it is not)."""
        seen = self.last_seen.get(rank)
        ago = "" if seen is None else f", heard {time.monotonic() - seen:.1f} s ago"
        held = f"(host {self._host(rank)}, {self._steps_of(rank)}{ago})"
        pid = self.processes.pid(rank)
        if pid is not None and self.processes.stopped(rank) is not None:
            return _Refused(
                f"rank {rank} is held by a stopped worker {held}: its process (pid {pid}, on "
                f"this host) {WORKER_STOPPED}; let it go on (kill -CONT {pid}, or the "
                f"debugger's continue), or end it (kill -9 {pid}) and start the rank again"
            )
        live = "" if pid is None else f"the live one is pid {pid} on this host; "
        return _Refused(
            f"rank {rank} is held by a live worker {held}: is this a second copy of its "
            f"command? stop one of them ({live}a worker of another job needs shards of its own)"
        )

    def _check_timeouts(self, now: float) -> None:
        """Take each held hello whose rank's worker stayed silent for :func:`heard_within`
        (a restart), said bye, or holds the rank no more; then the shard's own timeouts."""
        limit = heard_within(self.config.timeout)
        for rank, held in list(self.held_hellos.items()):
            gone = rank in self.left or rank not in self.run_of or self._links_closed(rank)
            if gone or now - self.last_seen.get(rank, held.seen) > limit:
                del self.held_hellos[rank]
                self._take_held(held)
        super()._check_timeouts(now)  # type: ignore[misc]

    def _take_held(self, held: HeldHello) -> None:
        """Answer ``held`` as if it arrived now (its rank's worker went silent: a restart)."""
        self.requests += 1
        try:
            if self.failed:
                raise _Refused(
                    self._failed_words(held.header), **self._failed_reply_fields(held.header)
                )
            self._taking = held.header
            self._op_hello(held.ident, held.header, held.arrays)
        except (WireError, _Refused) as exc:
            log.warning("shard %d: a held hello refused: %s", self.index, exc)
            self._reply(held.ident, held.header, error=str(exc), **getattr(exc, "fields", {}))
        except Exception as exc:  # as a request's (handlers.py): no bug takes the shard down
            self.stats.errors += 1
            log.exception("shard %d: rank %d's held hello failed", self.index, held.header["rank"])
            self._reply(held.ident, held.header, error=f"shard error: {named(exc)}")
        finally:
            self._taking = None
