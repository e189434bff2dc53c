"""The handshakes a shard's socket fails, read from its ZeroMQ monitor: a peer without CURVE
(an ``--insecure`` worker), one with another job's ``server.key``, or one that speaks no ZMTP
(a port scan). ZeroMQ drops each without a word to the shard; the monitor tells
:class:`~distconv.sync.ps.refused_peers.RefusedConnections`, which logs and counts them.

A key not the job's is the ZAP handler's to tell (:mod:`~distconv.sync.ps.zap`), with its
address; these events carry none (libzmq 4.3 names the shard's own endpoint, and the
connection's descriptor is closed by the time the event is read), so they are logged without
one. A frame over ``MAXMSGSIZE`` ends its connection with the same event as a peer closing it:
no event tells it apart. The monitor's queue is ZeroMQ's (1000 events at most), read by the
serving loop between batches of requests.
"""

from __future__ import annotations

import zmq
from zmq.utils.monitor import recv_monitor_message

from distconv.sync.ps.refused_peers import RefusedConnections

#: the events read: a handshake failed for its protocol, or for no reason ZeroMQ names
EVENTS = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
#: what a failed handshake's protocol error says of the peer
CAUSES = {
    zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH: "a security mechanism not the shard's (an "
    "--insecure worker against a CURVE shard, or CURVE against an --insecure one?)",
    zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC: "its CURVE handshake failed (a worker given "
    "another job's server.key?)",
}


class ShardMonitor:
    """The monitor of a shard's ROUTER ``router``, telling ``refused`` of failed handshakes.

    Attributes:
        socket: the monitor's socket, for the serving loop's poller.
    """

    def __init__(self, router: zmq.Socket, refused: RefusedConnections) -> None:
        self._router, self._refused = router, refused
        self.socket = router.get_monitor_socket(EVENTS)
        self.socket.linger = 0

    def read(self) -> None:
        """Tell every failed handshake queued on the monitor (the serving loop's thread)."""
        while True:
            try:
                event = recv_monitor_message(self.socket, zmq.NOBLOCK)
            except zmq.Again:
                return
            self._refused.note("", self._cause(event["event"], event["value"]))

    @staticmethod
    def _cause(event: int, value: int) -> str:
        if event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
            # the peer closed first: one that found the mechanism not its own (the race of
            # the two greetings decides which side sees it), a port scan, an HTTP probe
            return "its handshake ended early (a peer without CURVE, a port scan, a probe?)"
        return CAUSES.get(value, f"a ZMTP handshake error (protocol error 0x{value:08x})")

    def close(self) -> None:
        """Stop the monitor and close its socket (before the shard's socket closes)."""
        self._router.disable_monitor()
        self.socket.close(0)
