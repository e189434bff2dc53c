"""A shard's log of what it refuses, bounded per peer and cause, and how it names a peer.

Each bad request was a warning of its own: one peer sending garbage (a bug's loop, a replay of
an old run, an attack) wrote 20,000 lines in under 4 s, and a node's disk filled in hours. The
shard applies the rule a worker applies to a shard's stray replies
(:class:`~distconv.sync.ps.log_tally.LogTally`) to each (peer, cause): the first few in full,
then only the count at each power of ten. A peer choosing its cause (an op name of its own in
each request, a new CURVE key each connection) would make every line a first: so a peer's lines
in full, and all peers', are bounded too; the peers a key of the job's signed (the ranks, under
CURVE) share a pool of their own, so a flood of strangers leaves a worker's own error logged.
Every refusal still counts in the stats' ``errors``
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
#: the lines in full of one peer, of all its causes, per :data:`REFUSALS_WINDOW`: a peer that
#: varies its cause (an op name of its own in each request, a new CURVE key each connection)
#: makes each line a new cause, and was logged in full once a request
PEER_LOGGED = 20
#: the lines in full of all peers per :data:`REFUSALS_WINDOW`: peers of ever new addresses
MOST_LOGGED = 60
#: the tallies kept at once: a peer varying its cause or address must not grow the table
#: without end; past it the one least recently used is forgotten (not the oldest made: a peer
#: flooding with new causes would forget its own tally of all its causes every so often, and its
#: counts of it start again at 1, 10, 100, a few lines each time)
MOST_TALLIED = 1024
#: the pools of lines in full shared by peers: those whose requests a key of the job's signed
#: (ranks, under CURVE) have their own, so strangers flooding from many addresses or with new
#: keys cannot silence a worker's own error; the tally's kind is its key's first item
STRANGERS, RANKS = ("any peer",), ("any rank's key",)
#: the lines in full per :data:`REFUSALS_WINDOW` of each kind of tally
LINES = {
    "cause": REFUSALS_LOGGED,
    "peer": PEER_LOGGED,
    STRANGERS[0]: MOST_LOGGED,
    RANKS[0]: MOST_LOGGED,
}
#: what the count of each kind of tally says it counts
COUNTED = {"cause": "like this from {peer}", "peer": "refusals from {peer} of other causes"}


class RefusalLog:
    """Lines of refusals, at most :data:`REFUSALS_LOGGED` in full per (peer, cause),
    :data:`PEER_LOGGED` per peer and :data:`MOST_LOGGED` of all strangers (and as many of all
    ranks' keys) per :data:`REFUSALS_WINDOW`, the others counted at each power of ten. A new
    cause's first line is logged unless its peer (or its pool) already logged their share in
    the window: a flood, whose count is logged.
    Safe to call from several threads (the serving loop, the CURVE authenticator's).

    Args:
        shard: the shard's index, which each line starts with.
    """

    def __init__(self, shard: int) -> None:
        self.shard = shard
        self._tallies: dict[tuple[str, ...], LogTally] = {}
        self._lock = threading.Lock()

    def note(
        self, level: int, peer: str, line: str, cause: str | None = None, known: bool = False
    ) -> None:
        """Log ``line`` (which names ``peer``) at ``level``, or count it. ``cause``: what makes
        two lines alike, by default the line with its numbers taken out (a rank, a run, a
        step: the same cause); a caller quoting what a peer chose (a key) names it instead.
        ``known``: a key of the job's signed it (a rank's pool of lines, not strangers')."""
        cause = re.sub(r"\d+", "#", line) if cause is None else cause
        now = time.monotonic()
        with self._lock:
            scopes = (("cause", peer, cause), ("peer", peer), RANKS if known else STRANGERS)
            tallies = [self._tally(scope, now) for scope in scopes]
            for tally, scope in zip(tallies, scopes):
                if not tally.admit(now):
                    if tally.count_due():
                        what = COUNTED.get(scope[0], "refusals of {}").format(scope[0], peer=peer)
                        self._log_count(level, tally.unshown, what, line)
                    return
            unshown = tallies[0].take_unshown()
            more = f"; {unshown} more like this from {peer} before it, not logged"
            log.log(level, "shard %d: %s%s", self.shard, line, more if unshown else "")

    def _log_count(self, level: int, unshown: int, what: str, line: str) -> None:
        log.log(
            level,
            "shard %d: %d more %s, not logged (the latest: %s); at most %d of a peer and cause, "
            "%d of a peer and %d of all strangers (as many of all ranks' keys) are logged every "
            "%g s, then only this count at each power of ten",
            self.shard, unshown, what, line,
            REFUSALS_LOGGED, PEER_LOGGED, MOST_LOGGED, REFUSALS_WINDOW,
        )  # fmt: skip

    def _tally(self, scope: tuple[str, ...], now: float) -> LogTally:
        """The tally of ``scope``, made if new, and now the most recently used."""
        tally = self._tallies.pop(scope, None)
        if tally is None:
            if len(self._tallies) >= MOST_TALLIED:
                unused = next(key for key in self._tallies if len(key) > 1)  # pools are kept
                del self._tallies[unused]
            tally = LogTally(now, LINES[scope[0]], REFUSALS_WINDOW)
        self._tallies[scope] = tally  # at the end: the least recently used come first
        return tally


def peer_name(frame: Any, signer: int | None) -> str:
    """The peer that sent ``frame`` (a received ``zmq.Frame``): its address, and under CURVE
    the rank whose key signed it, ``signer`` (:func:`signer_rank`: ``127.0.0.1 (rank 1's
    key)``)."""
    try:
        address = frame.get("Peer-Address")
    except zmq.ZMQError:  # a transport that keeps none
        address = None
    name = address or "an unknown address"
    return name if signer is None else f"{name} (rank {signer}'s key)"


def signer_rank(frame: Any, key_rank: dict[bytes, int]) -> int | None:
    """The rank whose key (of ``key_rank``'s) signed ``frame``; None if none did."""
    return key_rank.get(keyfiles.user_id(frame) or b"")
