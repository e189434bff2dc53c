"""A worker's watch on the handshakes of its connections to the shards.

A shard that refuses a connection's handshake answers nothing on it. A worker without CURVE
(``--insecure``) meeting a CURVE shard, or the reverse, fails ZMTP's mechanism check; a worker
whose key is not one of the job's is refused by the shard's ZAP handler. ZeroMQ then drops that
connection for good, without a word on the socket itself: the worker would wait out its
timeout, and then block sending its ``bye`` into a connection that has no queue left (measured:
a ``--insecure`` worker against a CURVE shard hung until killed). ZeroMQ's socket monitor does
report failed handshakes. This watch reads them, so that the worker stops at once naming the
shard and the cause, and a wait that times out can say that the handshakes kept failing. It also
keeps each shard's connection (:class:`~distconv.sync.ps.links.Link`, from the monitor's
``EVENT_CONNECTED``), whose bytes tell a large reply still crossing from a silent shard, and
counts the connections lost (:attr:`HandshakeWatch.drops`) and come back
(:meth:`HandshakeWatch.came_back`): a request sent into a connection that dropped is lost with
it, and a shard restarted meanwhile never hears of it (:mod:`~distconv.sync.ps.lost_requests`).
"""

from __future__ import annotations

from collections.abc import Sequence

import zmq
from zmq.utils.monitor import recv_monitor_message

from distconv.sync.base import SyncError
from distconv.sync.ps.links import Link

#: handshakes ZeroMQ gives up on: it never tries that connection again
_REFUSED = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
#: a handshake cut short without a reason, which ZeroMQ tries again; what a worker holding
#: another job's ``server.key`` meets (the shard cannot read its hello), and also what a
#: connection that breaks mid-handshake gives, so it is a hint on a timeout, not an error
_UNEXPLAINED = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
#: a handshake that went through: the unexplained failures before it were not a wrong key
_SUCCEEDED = zmq.EVENT_HANDSHAKE_SUCCEEDED
#: a connection made (its value: the descriptor) or lost
_LINK = zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED
#: ZeroMQ's names of its protocol errors (the value of a failed handshake's event)
_PROTOCOL_ERRORS = {
    getattr(zmq, name): name.removeprefix("PROTOCOL_ERROR_")
    for name in dir(zmq)
    if name.startswith("PROTOCOL_ERROR_")
}


def monitor_of(sock: zmq.Socket) -> zmq.Socket:
    """The monitor of ``sock``'s handshakes (made on the first call, the same one after).
    ZeroMQ reports a failed handshake only to a monitor that exists at that moment: call it
    before ``sock`` connects, or a shard that refuses at once is never heard of."""
    return sock.get_monitor_socket(_REFUSED | _UNEXPLAINED | _SUCCEEDED | _LINK)


class HandshakeWatch:
    """Monitors of the handshakes of ``socks`` (one per shard), registered with ``poller`` so
    that a wait sees a refusal as soon as ZeroMQ reports it; the socket owner's thread only.

    Args:
        socks: the worker's request sockets, shard by shard.
        poller: the poller its waits poll.
        insecure: whether this worker runs without CURVE (to name the mismatch).
    """

    def __init__(self, socks: Sequence[zmq.Socket], poller: zmq.Poller, insecure: bool) -> None:
        self._insecure = insecure
        self._socks = list(socks)
        self._monitors = [monitor_of(sock) for sock in socks]  # made at connect (see there)
        self._shard_of = {monitor: shard for shard, monitor in enumerate(self._monitors)}
        #: handshakes of each shard's connection that failed without a reason, since the last
        #: one that succeeded
        self.unexplained = [0] * len(socks)
        #: each shard's connection while it is up, else None
        self.links: list[Link | None] = [None] * len(socks)
        #: each shard's connections lost so far (``EVENT_DISCONNECTED`` read)
        self.drops = [0] * len(socks)
        #: each shard's :attr:`drops` when its latest handshake succeeded
        self._back_after = [0] * len(socks)
        for monitor in self._monitors:
            poller.register(monitor, zmq.POLLIN)

    def monitor(self, shard: int) -> zmq.Socket:
        """The monitor of ``shard``'s connection."""
        return self._monitors[shard]

    def owns(self, sock: zmq.Socket) -> bool:
        """Whether ``sock`` is one of this watch's monitors."""
        return sock in self._shard_of

    def refusal(self, monitor: zmq.Socket) -> tuple[int, str] | None:
        """Read ``monitor``'s events: ``(shard, why)`` for a handshake ZeroMQ gave up on,
        else None (an unexplained failure is counted in :attr:`unexplained`, until the next
        handshake that succeeds; a connection made or lost updates :attr:`links`)."""
        shard = self._shard_of[monitor]
        while True:
            try:
                event = recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                return None
            if event["event"] == _UNEXPLAINED:
                self.unexplained[shard] += 1
            elif event["event"] == _SUCCEEDED:  # a shard's restart, a brief outage: not a key
                self.unexplained[shard] = 0
                self._back_after[shard] = self.drops[shard]
            elif event["event"] == zmq.EVENT_CONNECTED:
                self.links[shard] = Link(event["value"])
            elif event["event"] == zmq.EVENT_DISCONNECTED:
                self.links[shard] = None
                self.drops[shard] += 1
            elif event["event"] & _REFUSED:
                return shard, self._why(event["event"], event["value"])

    def refused(self, monitor: zmq.Socket, rank: int, endpoints: Sequence[str]) -> SyncError | None:
        """The error of worker ``rank`` naming the shard (of ``endpoints``) whose handshake
        ZeroMQ gave up on, as ``monitor`` reports it (:meth:`refusal`); else None."""
        if (refused := self.refusal(monitor)) is None:
            return None
        shard, why = refused
        return SyncError(
            f"rank {rank}: pserver shard {shard} ({endpoints[shard]}) refused this worker's "
            f"connection: {why}"
        )

    def came_back(self, shard: int) -> bool:
        """Whether ``shard``'s connection dropped and a new one's handshake has succeeded since
        the latest drop (the shard restarted, or the network came back)."""
        return 0 < self.drops[shard] == self._back_after[shard]

    def idle(self, shard: int) -> float | None:
        """Seconds since bytes last arrived from ``shard`` (:meth:`Link.idle
        <distconv.sync.ps.links.Link.idle>`); None where not known."""
        link = self.links[shard] if shard >= 0 else None
        return None if link is None else link.idle()

    def hint(self, shards: Sequence[int]) -> str:
        """What to add to a message that ``shards`` gave no answer: that their handshakes kept
        failing, if they did."""
        failed = sum(self.unexplained[s] for s in shards if s >= 0)
        if not failed:
            return ""
        return (
            f"; the connection's handshake failed {failed} time(s): is server.key in --keys "
            "the key of this job's shards?"
        )

    def close(self) -> None:
        """Stop the monitors and close their sockets (before the context is terminated)."""
        for sock in self._socks:
            if not sock.closed:
                sock.disable_monitor()
        for monitor in self._monitors:
            monitor.close(linger=0)

    def _why(self, kind: int, value: int) -> str:
        if kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return (
                f"the shard does not know this worker's key (its ZAP handler answered {value}): "
                "--keys must be the job's key directory, holding this rank's worker key"
            )
        if value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
            ours, theirs = ("--insecure", "CURVE") if self._insecure else ("CURVE", "--insecure")
            return (
                f"this worker runs {ours} and the shard {theirs}: both sides need the same "
                "(--keys DIR, or --insecure for both)"
            )
        return f"ZeroMQ protocol error {_PROTOCOL_ERRORS.get(value, hex(value))} in its handshake"
