"""What a worker says while a shard it waits for stays silent, before it gives up on it.

A wait gives up on a shard after 1.5 x ``--timeout`` (90 s by default), and said nothing before:
an operator whose shard was late to start, or whose ``--pservers`` named a host that does not
resolve (yet), watched a silent worker for that long. So a wait says once, after
:data:`TELL_AFTER` seconds, which shard it waits for and that no answer came yet
(:meth:`SilentShards._tell_silent`); once per shard until it answers again, so that a shard silent
over many waits is one line, not one per wait. Not for a request that the shard holds until every
worker asked (a sync step's push, a gather): its silence is a worker's, which the shard names.

ZeroMQ resolves a shard's host name itself, and tries again without a word while it does not
resolve: that line and the words giving up (:func:`unresolved_hint`) say so where it is the case.
"""

from __future__ import annotations

import logging
import math
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from distconv.endpoint import split_endpoint
from distconv.straggler_words import seconds_text, unresolved_text
from distconv.sync.ps.shard_timeouts import holds_for_workers
from distconv.sync.ps.stuck import wait_words

log = logging.getLogger("distconv.pserver")

#: seconds a wait hears nothing from a shard before it says that it waits for it
TELL_AFTER = 5.0


class SilentShards:
    """The silent-shard side of :class:`~.channel.ShardChannel` (a mixin); it reads the
    worker's ``rank``, ``mode``, ``endpoints`` and ``_named``."""

    rank: int
    mode: str
    endpoints: list[str]
    _named: Callable[..., str]
    #: the shards said to be silent, until each answers again (a set per worker: see the wait)
    _told_silent: frozenset[int] = frozenset()

    def _tell_silent(self, quiet: Mapping[int, float], what: str, limit: float) -> float:
        """Log, once per shard until it answers again, that this wait for ``what`` has heard
        nothing from a shard (``quiet``: shard -> when last heard) for :data:`TELL_AFTER`
        seconds of its ``limit``; the seconds until the next such line is due (inf: none)."""
        if limit <= TELL_AFTER or holds_for_workers(what, self.mode):
            return math.inf
        now = time.monotonic()
        due = {s: t + TELL_AFTER for s, t in quiet.items() if s >= 0}
        late = sorted(s for s, at in due.items() if at <= now and s not in self._told_silent)
        if late:
            self._told_silent = self._told_silent | set(late)
            log.warning(
                "rank %d: waiting for pserver shard(s) %s: no answer yet to %s after %s s "
                "(it waits up to %s s)%s",
                *(self.rank, self._named(late), wait_words(what), seconds_text(TELL_AFTER)),
                *(seconds_text(limit), unresolved_hint(late, self.endpoints)),
            )
        waiting = [at for s, at in due.items() if s not in self._told_silent]
        return max(0.0, min(waiting) - now) if waiting else math.inf

    def _heard_again(self, shard: int) -> None:
        """``shard`` answered: a later silence of it is said again."""
        self._told_silent = self._told_silent - {shard}


def unresolved_hint(shards: Iterable[int], endpoints: Sequence[str]) -> str:
    """``; the host name 'h' of shard 1 does not resolve (yet): ...`` for the first of
    ``shards`` whose host name in ``endpoints`` does not resolve now; '' where each does."""
    for shard in shards:
        host, port = split_endpoint(endpoints[shard])
        try:
            socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            return unresolved_text(host, shard, exc.strerror)
    return ""
