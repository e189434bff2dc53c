"""Whether a worker on the shard's own host still runs, by its process in ``/proc``.

A worker killed outright (SIGKILL, the kernel's out-of-memory killer) says no ``bye``. The shard
learned of it only when its ``--timeout`` passed with no request and no beat, and the other
workers waited that long in their next step or collective: 60 s by default, and under a
launcher that stops the job at once, its whole grace, after which they were killed too.

So a worker says in its ``hello`` which process it is (:func:`process_identity`): the boot, the
PID namespace, its pid and the process's start time. A shard that shares the boot and the
namespace (a job on one host: the launcher's local jobs, tests) and can see the process then
(:meth:`ProcessWatch.track`) looks it up again while the rank is live and has not said bye
(:meth:`ProcessWatch.ended`). A process that is gone, a zombie, or whose pid now belongs to a
process started later is a rank that is gone, now rather than after the timeout. Elsewhere
(another host, container or OS) the identity does not match, and the timeout stays the rule.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from distconv.build_identity import build_id
from distconv.procfs import (
    PID_TEXT,
    has_ended,
    is_there,
    pid_namespace,
    process_identity,
    process_stat,
)
from distconv.sync.ps.config import hostname

#: the shortest time between two looks at the tracked processes, in seconds
LOOK_EVERY = 0.5
#: what a worker's process that ended did: a worker that stops on its own says ``bye`` first
WORKER_ENDED = "ended without a bye: killed (SIGKILL, out of memory) or crashed"
#: a process's states in ``/proc/PID/stat`` that say it is stopped: by a signal (SIGSTOP,
#: Ctrl-Z's SIGTSTP), or by a debugger that traces it
STOPPED_STATES = ("T", "t")
#: what a silent worker's process that :meth:`ProcessWatch.stopped` found stopped is
WORKER_STOPPED = "is stopped (SIGSTOP, Ctrl-Z, a debugger)"


def whoami() -> dict[str, Any]:
    """The fields of a worker's ``hello`` (and a shard's reply) that say where it runs and
    what: ``host``, ``process`` and ``build`` (:func:`~distconv.build_identity.build_id`)."""
    return {"host": hostname(), "process": process_identity(), "build": build_id()}


class ProcessWatch:
    """The processes that run beside this one, by key: a shard's workers by rank, a worker's
    shards by index."""

    def __init__(self) -> None:
        self._here = pid_namespace()
        self._pids: dict[int, tuple[int, str]] = {}  # key -> (pid, start time)
        #: keys whose process a look found ended, named at the next look unless they said bye
        #: (or hello) meanwhile: a worker says bye without waiting for a reply and exits, and
        #: its bye may still wait in the shard's queue (behind other workers' requests, in the
        #: I/O thread) when its process has gone
        self._seen_ended: set[int] = set()
        self._next_look = 0.0

    def track(self, key: int, identity: str, host: str) -> None:
        """Follow the process ``identity`` (its :func:`process_identity`; ``host``: its host
        name) as ``key`` (a rank's latest ``hello``, or a shard's reply to it) if it runs
        beside this process (this host's name too: VMs cloned from one snapshot share a boot
        id) and is visible now; else stop following ``key`` (a restart elsewhere)."""
        self.forget(key)
        parts = identity.split(" ")
        if self._here is None or len(parts) != 4 or tuple(parts[:2]) != self._here:
            return
        if host != hostname():
            return
        if not PID_TEXT.fullmatch(parts[2]):
            return
        pid, start = int(parts[2]), parts[3]
        try:
            stat = process_stat(pid)
        except OSError:  # there, but not readable: nothing to follow
            return
        if not has_ended(stat, start):
            self._pids[key] = (pid, start)

    def pid(self, key: int) -> int | None:
        """The pid of ``key``'s followed process (one on this host), or None where none is."""
        followed = self._pids.get(key)
        return None if followed is None else followed[0]

    def stopped(self, key: int) -> int | None:
        """The pid of ``key``'s followed process where it is stopped now (state ``T``: SIGSTOP,
        Ctrl-Z; ``t``: a debugger's trace stop), which names why it went silent; None where it
        runs, has ended, is not followed or cannot be read."""
        if (read := self._read(key)) is None:
            return None
        pid, start, stat = read
        if has_ended(stat, start) or stat[0] not in STOPPED_STATES:
            return None
        return pid

    def alive(self, key: int) -> bool | None:
        """Whether ``key``'s followed process runs now (True: stopped too) or has ended (False),
        looked up at once; None where it is not followed or cannot be read now."""
        if (read := self._read(key)) is None:
            return None
        pid, start, stat = read
        if stat is None and is_there(pid):  # hidden since it was tracked: no news either
            return None
        return not has_ended(stat, start)

    def _read(self, key: int) -> tuple[int, Any, Any] | None:
        """``key``'s followed pid, its start and its stat now; None where it is not followed
        or cannot be read now (no news)."""
        if key not in self._pids:
            return None
        pid, start = self._pids[key]
        try:
            return pid, start, process_stat(pid)
        except OSError:
            return None

    def forget(self, key: int) -> None:
        """Stop following ``key`` (a rank that said bye, or was lost)."""
        self._pids.pop(key, None)
        self._seen_ended.discard(key)

    def look_due(self, now: float) -> bool:
        """Whether :meth:`ended` would look at the processes at ``now`` (the shard first reads
        what is queued: a bye there says a rank closed)."""
        return bool(self._pids) and now >= self._next_look

    def ended(self, keys: Iterable[int], now: float | None = None) -> Iterator[tuple[int, int]]:
        """``(key, pid)`` for each of ``keys`` (ranks, or shards) whose followed process has
        ended, at most once per :data:`LOOK_EVERY` seconds; a key is named once, at the look
        after the one that first found its process ended (a bye queued meanwhile is read
        first)."""
        now = time.monotonic() if now is None else now
        if not self.look_due(now):
            return
        self._next_look = now + LOOK_EVERY
        for key in sorted(set(keys) & set(self._pids)):
            pid, start = self._pids[key]
            try:
                stat = process_stat(pid)
            except OSError:  # not readable now (no file descriptor left ...): no news
                continue
            if stat is None and is_there(pid):  # hidden since it was tracked: no news either
                continue
            if has_ended(stat, start):
                if key not in self._seen_ended:
                    self._seen_ended.add(key)
                    continue
                del self._pids[key]
                self._seen_ended.discard(key)
                yield key, pid
