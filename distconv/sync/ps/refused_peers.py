"""The connections a shard refuses, logged and counted: the one event of security an operator
needs to see (a stranger, a worker of another job, an ``--insecure`` worker), which ZeroMQ
otherwise drops without a word. A frame over the size cap ends its connection with no event
that tells it from a peer closing (:mod:`~distconv.sync.ps.shard_monitor`): it is not counted.

Refusals come from two threads: the ZAP handler's (a key not the job's,
:mod:`~distconv.sync.ps.zap`) and the serving loop's (its socket's monitor,
:mod:`~distconv.sync.ps.shard_monitor`). Each is logged as a refused request is, a few per
peer and cause (:class:`~distconv.sync.ps.request_log.RefusalLog`), and every one counts in
``/metrics`` (``distconv_shard_refused_connections``).
"""

from __future__ import annotations

import logging
import threading

from distconv.sync.ps.request_log import RefusalLog


class RefusedConnections:
    """A shard's refused connections: ``count`` so far, and their bounded log.

    Args:
        refusals: the shard's log of refusals, shared with its refused requests.
    """

    def __init__(self, refusals: RefusalLog) -> None:
        self._log = refusals
        self._lock = threading.Lock()
        self._count = 0

    @property
    def count(self) -> int:
        """The connections refused so far (any thread)."""
        with self._lock:
            return self._count

    def note(self, address: str, cause: str, quoted: str = "") -> None:
        """Count and log a connection from ``address`` refused for ``cause`` (any thread), with
        ``quoted`` what it sent (its key): not part of the cause, which a peer would otherwise
        choose anew for each connection, each then logged in full."""
        with self._lock:
            self._count += 1
        peer = address or "an unknown address"
        said = f"refused a connection from {peer}: {cause}"
        self._log.note(logging.WARNING, peer, f"{said}{quoted}", cause=said)

    def foreign_key(self, address: str, key: str) -> None:
        """A connection whose CURVE key is not one of the job's (the ZAP handler's thread)."""
        self.note(address, "its CURVE key is not one of the job's", f" ({key})")
