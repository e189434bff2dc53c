"""Requests lost with a connection that dropped, and the shard asked again.

A worker's request leaves through ZeroMQ into the TCP connection to its shard. Where that
connection drops with the request in it (the shard killed, its host gone, the network cut), the
request is lost: ZeroMQ connects again, but does not send it again. A shard started again at its
address meanwhile, on another host (no process of it that this worker could follow:
:mod:`~distconv.sync.ps.processes`), came up empty and never heard of the request. In sync mode
nothing more reaches it while the step waits, so the worker waited out 1.5 x its timeout and then
said that the shard was gone or slow (raise --timeout), when it had restarted and lost what it
was seeded with. An async worker learnt it at once, from the refusal of its next push.

So where a wait's shard had its connection drop and come back
(:meth:`~distconv.sync.ps.handshakes.HandshakeWatch.came_back`) while a request the wait awaits
may have been in the old one, the wait asks that shard again, once per drop, with a pull of no
block: nothing to carry, answered at once and empty by a shard that holds the job's values,
refused by one started again in the words that say so and what to do (``shard not seeded yet:
it started after this worker's hello ...: restart the job from its newest checkpoint``,
docs/protocol.md). A refusal ends the wait at once, as if it answered the request itself. An
empty answer leaves the wait as it was (a network cut: the request may be lost all the same),
and a wait given up says that the connection dropped and came back, not to raise ``--timeout``.

Only once this worker's setup completed: before, a live shard not seeded yet refuses the pull
as well (``worker 0 seeds it during setup``), and that refusal ended a setup whose connection
had only dropped (the network, a proxy at the shard's address before the shard was up) in words
that named neither the drop nor a way out. A wait of the setup still says the drop, giving up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from distconv.straggler_words import CAME_BACK
from distconv.sync.base import SyncError
from distconv.sync.ps.handshakes import HandshakeWatch

#: the request that asks a shard again: it needs the shard's values (a fresh shard refuses it)
#: and moves none
ASK_AGAIN: dict[str, Any] = {"op": "pull", "blocks": []}


class LostRequests:
    """The lost-request side of :class:`~.channel.ShardChannel` (a mixin). It reads the
    worker's handshake watch, request table and id counter; :meth:`_watch_drops` starts its
    bookkeeping with each new watch."""

    _handshakes: HandshakeWatch | None
    _rid_shard: dict[int, int]
    _replies: dict[int, tuple[dict[str, Any], list]]
    _next_id: int
    _send: Callable[..., int]
    _drop_replies: Callable[[set[int]], None]
    _error_reply: Callable[[int, str, dict[str, Any]], SyncError]
    #: whether a setup of this worker completed (every shard was seeded)
    _set_up: bool = False

    def _watch_drops(self) -> None:
        """Start afresh with a new handshake watch (its drop counts start at 0)."""
        #: shard -> (its drops when noted, the first request id sent after): requests below it
        #: may have been in the connection that dropped
        self._drops_noted: dict[int, tuple[int, int]] = {}
        #: shard -> its drops when it was last asked again: once per drop
        self._asked_at_drop: dict[int, int] = {}
        #: the current wait's requests asking again, by id -> shard
        self._asking: dict[int, int] = {}
        #: the shards whose connection came back in the current wait (asked again once set up)
        self._back_in_wait: set[int] = set()

    def _ask_again_if_lost(self, awaited: Iterable[int], what: str) -> None:
        """Ask again each shard whose connection came back after a drop that may have taken one
        of the ``awaited`` requests; raise the refusal of one asked before, if it came
        (:meth:`~.channel.ShardChannel._error_reply`, naming ``what`` the wait waits for)."""
        self._take_answers_to_asking(what)
        if self._handshakes is None or not any(self._handshakes.drops):  # the usual poll
            return
        oldest: dict[int, int] = {}
        for rid in awaited:
            if (shard := self._rid_shard.get(rid, -1)) >= 0:
                oldest[shard] = min(rid, oldest.get(shard, rid))
        for shard, rid in oldest.items():
            if self._lost_in_drop(shard, rid):
                self._asked_at_drop[shard] = self._handshakes.drops[shard]
                self._back_in_wait.add(shard)
                if self._set_up:  # before, an unseeded shard refuses it as well: see above
                    self._asking[self._send(shard, ASK_AGAIN)] = shard

    def _note_drops(self, shard: int) -> None:
        """Before a request to ``shard`` is sent, its monitor just read: a drop read now took
        the requests sent before, not this one (it waits in ZeroMQ's queue for the connection
        to come back). A drop read only by a later wait, the worker idle meanwhile, made every
        request that wait awaits look lost."""
        drops = self._handshakes.drops[shard]
        if drops and self._drops_noted.get(shard, (0, 0))[0] != drops:
            self._drops_noted[shard] = (drops, self._next_id)

    def _lost_in_drop(self, shard: int, rid: int) -> bool:
        """Whether request ``rid`` of ``shard`` may have been lost with a connection that
        dropped, which has come back since, and the shard was not asked again for that drop."""
        watch = self._handshakes
        drops = watch.drops[shard]
        if not drops or self._asked_at_drop.get(shard) == drops:
            return False
        self._note_drops(shard)  # read since the latest send: every request so far may be lost
        return rid < self._drops_noted[shard][1] and watch.came_back(shard)

    def _take_answers_to_asking(self, what: str) -> None:
        """Take the answers to asking again that came: an empty one is forgotten; a refusal
        is raised as the wait's."""
        for rid, shard in list(self._asking.items()):
            if rid in self._replies:
                del self._asking[rid]
                self._rid_shard.pop(rid, None)
                header, _ = self._replies.pop(rid)
                if header["op"] == "error":
                    raise self._error_reply(shard, what, header)

    def _came_back_hint(self, shards: Iterable[int]) -> str:
        """:data:`CAME_BACK` where the connection of one of ``shards`` came back in the current
        wait, after a drop that may have taken a request it awaits; else ''."""
        return CAME_BACK if self._back_in_wait & set(shards) else ""

    def _end_asking(self) -> None:
        """At a wait's end: its requests asking again are awaited no more."""
        self._drop_replies(set(self._asking))
        self._asking.clear()
        self._back_in_wait.clear()
