"""Replies in: each read off its shard's socket, checked as a message, and kept only as the
answer to an awaited request of that shard.

A reply is matched by its ``id`` and the socket it came on: the id of a request sent to that
shard, still awaited and not answered yet. Any other (a second reply to one request; an id
never sent to that shard; ``id`` -1, the answer to a header the shard could not read, where it
may answer a request given up on) is ignored, as ``docs/protocol.md`` says, and logged: kept,
it stayed for the rest of the run, or was taken later as the answer to another request (another
shard's, or one not sent yet). An error reply of ``id`` -1 from a shard that owes this worker
only answers awaited can only be one of theirs: it fails the wait at once; one from a shard that
owes an answer to a request given up on takes the place of that answer (the oldest).

:class:`ReplyIntake` is a mixin of :class:`~distconv.sync.ps.channel.ShardChannel`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import zmq

from distconv.sync.base import SyncError
from distconv.sync.ps.log_tally import LogTally
from distconv.sync.ps.stop_asked import asking_shard
from distconv.sync.ps.wire import MAX_MESSAGE_BYTES, WireError, short, unpack_arrays, unpack_header

log = logging.getLogger("distconv.pserver")

#: the ignored replies of a shard logged each in full per :data:`STRAYS_WINDOW` at most (a
#: token bucket); past them, only the count of those not logged at each power of ten (a shard
#: sending thousands, a bug's loop, would otherwise fill every worker's log)
STRAYS_LOGGED = 5
#: the seconds in which a shard's :data:`STRAYS_LOGGED` lines in full come back: a burst is
#: shown in full after a trickle slower than that, not hidden behind the trickle's count
STRAYS_WINDOW = 60.0
#: seconds past an ignored reply's reading within which a connection's latest bytes may still be
#: that reply's (the kernel's time of the last bytes is in jiffies, up to 10 ms, and read later)
STRAY_SLACK = 0.05


class ReplyIntake:
    """The reply table of a client: ``_replies`` (id -> reply), ``_rid_shard`` (id -> the
    shard of a request awaited), ``_replies_dropped`` (id -> the shard of a request given up on),
    ``_strays`` (shard -> a :class:`~distconv.sync.ps.log_tally.LogTally` of its replies
    ignored), ``_stray_at`` (shard ->
    when the latest of them was read)."""

    #: the shard whose ``ok`` reply last asked this worker to stop (it drains on its SIGTERM:
    #: :mod:`~distconv.sync.ps.stop_asked`), read by the stop agreement; None: none asked
    stop_asked_by_shard: int | None = None

    def _receive(self, sock: zmq.Socket) -> None:
        """Read every reply waiting on ``sock``, a request socket (or its handshake monitor)."""
        if self._handshakes is not None and self._handshakes.owns(sock):
            self._refuse_handshake(sock)
            return
        shard = self._socks.index(sock)
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            self._bytes_pulled += sum(len(f) for f in frames)
            try:
                header = unpack_header(frames[0].buffer, request=False)
                cap = self._reply_caps.get(sock, MAX_MESSAGE_BYTES)
                arrays = unpack_arrays(header, [f.buffer for f in frames[1:]], cap)
                check_op(header)
            except WireError as exc:
                raise self._malformed(shard, exc) from None
            self._take(shard, header, arrays)

    def _take(self, shard: int, header: dict[str, Any], arrays: list) -> None:
        """Keep a reply of ``shard`` if it answers a request of that shard still awaited; note
        a stop it asks for, whatever it answers (the shard is draining all the same)."""
        if header["op"] == "ok" and (asker := asking_shard(header)) is not None:
            self.stop_asked_by_shard = asker
        rid = header.get("id", -1)
        if rid == -1 and header["op"] == "error" and not self._forget_one_given_up(shard):
            if self._owes_awaited(shard):
                # the shard answers each request once: the awaited answer will never come
                raise SyncError(
                    f"rank {self.rank}: pserver shard {self._named([shard])} could not read a "
                    f"request of this worker (its reply has id -1): {short(header.get('error'))}"
                )
        if self._rid_shard.get(rid, -1) == shard and rid not in self._replies:
            self._replies[rid] = (header, arrays)
            return
        if self._replies_dropped.get(rid, -1) == shard:  # nobody waits for it: keep nothing
            # but its bytes were a live shard's, working through what it was asked: a retry's
            # wait, its own answer queued behind this one, is not given up when it is read
            del self._replies_dropped[rid]
        else:
            self._ignore(shard, header)

    def _forget_one_given_up(self, shard: int) -> bool:
        """Whether ``shard`` owes a reply to a request given up on: then an error reply of id -1
        of it may be that answer (or an awaited request's: it cannot say which), and the oldest
        such request is forgotten, as its late answer's id would have done. Kept, its entry
        (matched by an id this reply lacks) made every later -1 of the shard ambiguous for the
        rest of the run. One entry per -1: while the shard owes no request given up on, a -1
        can only answer an awaited one. Asked only of such replies (rare): a scan is cheap."""
        given_up = [r for r, s in self._replies_dropped.items() if s == shard]
        if given_up:
            del self._replies_dropped[min(given_up)]  # the oldest: the likeliest answered first
        return bool(given_up)

    def _owes_awaited(self, shard: int) -> bool:
        """Whether ``shard`` owes this worker a reply to a request still awaited."""
        return any(s == shard and r not in self._replies for r, s in self._rid_shard.items())

    def _bytes_heard(self, shard: int, at: float, otherwise: float) -> float:
        """``at``, when bytes last arrived on ``shard``'s connection (a large reply crossing),
        unless they may be those of its latest reply to nothing awaited: then ``otherwise``.
        Counted, a shard sending such replies more often than a wait's limit kept the wait
        going for as long as it did, the request awaited never answered. A late reply to a
        request given up is no such reply: one per request, from a shard that answers."""
        return otherwise if at <= self._stray_at.get(shard, -1.0) + STRAY_SLACK else at

    def _ignore(self, shard: int, header: dict[str, Any]) -> None:
        """Log a reply of ``shard`` that answers no request of it awaited (docs/protocol.md:
        a worker ignores it); an error reply's text too (a request the shard could not read).
        Past :data:`STRAYS_LOGGED` of a shard in :data:`STRAYS_WINDOW`, only the count of those
        not logged at each power of ten (:class:`~distconv.sync.ps.log_tally.LogTally`). Its
        bytes tell nothing of a reply awaited: when it was read is kept for :meth:`_bytes_heard`."""
        now = self._stray_at[shard] = time.monotonic()
        tally = self._strays.setdefault(shard, LogTally(now, STRAYS_LOGGED, STRAYS_WINDOW))
        said = f"id {short(header.get('id'))}, op {short(header.get('op'))}" + (
            f": {short(header.get('error'))}" if header.get("op") == "error" else ""
        )
        if tally.admit(now):
            unshown = tally.take_unshown()
            log.warning(
                "rank %d: ignored a reply of pserver shard %s to no request of it awaited (%s)%s",
                self.rank,
                self._named([shard]),
                said,
                f"; {unshown} more of this shard ignored before it, not logged" if unshown else "",
            )
        elif tally.count_due():
            log.warning(
                "rank %d: %d replies of this shard ignored and not logged, pserver shard %s, to no "
                "request of it awaited (the latest: %s); at most %d are logged in full every %g s, "
                "then only this count at each power of ten",
                self.rank,
                tally.unshown,
                self._named([shard]),
                said,
                STRAYS_LOGGED,
                STRAYS_WINDOW,
            )

    def _drop_replies(self, rids: set[int]) -> None:
        """Forget requests nobody will wait for: a reply already here, or one still to come
        (dropped on arrival), would otherwise stay for the rest of the run."""
        for rid in rids:
            shard = self._rid_shard.pop(rid, None)
            self._rid_bytes.pop(rid, None)
            if self._replies.pop(rid, None) is None and shard is not None:
                self._replies_dropped[rid] = shard


def check_op(header: dict[str, Any]) -> None:
    """WireError unless a reply's ``op`` is ``"ok"``, or ``"error"`` with its ``error`` text:
    another was read as an answer and written, an error without its text said ``None``."""
    op = header["op"]
    if op not in ("ok", "error"):
        raise WireError(f"reply op {short(op)}, not 'ok' or 'error'")
    if op == "error" and "error" not in header:
        raise WireError("an error reply without its 'error' text")
