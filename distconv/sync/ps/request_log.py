"""A shard's log of what it refuses, bounded per peer and cause, and how it names a peer.

Each bad request was a warning of its own: one peer sending garbage (a bug's loop, a replay of
an old run, an attack) wrote 20,000 lines in under 4 s, and a node's disk filled in hours. The
shard applies the rule a worker applies to a shard's stray replies
(:class:`~distconv.sync.ps.log_tally.LogTally`) to each (peer, cause): the first few in full,
then only the count at each power of ten. Every refusal still counts in the stats' ``errors``
(and ``/metrics``); only the log is thinned.

A peer is named by its address, and under CURVE by the rank whose key signed the request:
ZeroMQ's routing id (``b'\\x00k\\x8bEl'``) names nothing an operator can look up.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

import zmq

from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.log_tally import LogTally

log = logging.getLogger("distconv.pserver")

#: the lines in full of one (peer, cause) per :data:`REFUSALS_WINDOW` (as a worker's strays)
REFUSALS_LOGGED = 5
#: the seconds in which a (peer, cause)'s :data:`REFUSALS_LOGGED` lines in full come back
REFUSALS_WINDOW = 60.0
#: the (peer, cause) pairs tallied at once: a peer varying its cause (a text of its own in
#: each header) must not grow the table without end; past it the oldest pair is forgotten
MOST_TALLIED = 1024


class RefusalLog:
    """Lines of refusals, at most :data:`REFUSALS_LOGGED` in full per (peer, cause) per
    :data:`REFUSALS_WINDOW`, then a count at each power of ten. Safe to call from several
    threads (the serving loop, the CURVE authenticator's, a socket monitor's reader).

    Args:
        shard: the shard's index, which each line starts with.
    """

    def __init__(self, shard: int) -> None:
        self.shard = shard
        self._tallies: dict[tuple[str, str], LogTally] = {}
        self._lock = threading.Lock()

    def note(self, level: int, peer: str, line: str) -> None:
        """Log ``line`` (which names ``peer``) at ``level``, or count it; its cause is the line
        with its numbers taken out (a rank, a run, a step: the same cause)."""
        cause = re.sub(r"\d+", "#", line)
        now = time.monotonic()
        with self._lock:
            tally = self._tally((peer, cause), now)
            if tally.admit(now):
                unshown = tally.take_unshown()
                more = f"; {unshown} more like this from {peer} before it, not logged"
                log.log(level, "shard %d: %s%s", self.shard, line, more if unshown else "")
            elif tally.count_due():
                log.log(
                    level,
                    "shard %d: %d more like this from %s, not logged (the latest: %s); at most "
                    "%d of a peer and cause are logged every %g s, then only this count at each "
                    "power of ten",
                    self.shard,
                    tally.unshown,
                    peer,
                    line,
                    REFUSALS_LOGGED,
                    REFUSALS_WINDOW,
                )

    def _tally(self, key: tuple[str, str], now: float) -> LogTally:
        tally = self._tallies.get(key)
        if tally is None:
            if len(self._tallies) >= MOST_TALLIED:
                del self._tallies[next(iter(self._tallies))]  # the oldest pair
            tally = self._tallies[key] = LogTally(now, REFUSALS_LOGGED, REFUSALS_WINDOW)
        return tally


def peer_name(frame: Any, key_rank: dict[bytes, int]) -> str:
    """The peer that sent ``frame`` (a received ``zmq.Frame``): its address, and under CURVE
    the rank whose key signed it (``127.0.0.1 (rank 1's key)``)."""
    try:
        address = frame.get("Peer-Address")
    except zmq.ZMQError:  # a transport that keeps none
        address = None
    name = address or "an unknown address"
    rank = key_rank.get(keyfiles.user_id(frame) or b"")
    return name if rank is None else f"{name} (rank {rank}'s key)"
