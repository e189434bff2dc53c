"""Which distconv release each end of a parameter-server job runs.

A peer of another protocol version (:class:`OtherProtocol`) is named with both versions and
the way on, not as a "malformed reply": it runs another release.
"""

from __future__ import annotations

from typing import Any

from distconv.sync.base import SyncError
from distconv.sync.ps.wire import PROTOCOL_VERSION, WireError, short

#: the way on every word here names
SAME_RELEASE = "run workers and shards of the same release"


class OtherProtocol(WireError):
    """A header of another protocol version: a peer of another distconv release."""

    def __init__(self, theirs: Any) -> None:
        self.theirs = theirs
        super().__init__(
            f"protocol version {short(theirs)}, expected {PROTOCOL_VERSION}: another release "
            f"of distconv; {SAME_RELEASE}"
        )


def other_protocol(rank: int, shard: str, problem: object) -> SyncError | None:
    """The error for a reply of ``shard`` (its words) in another protocol version, where
    ``problem`` says so; else None (a malformed reply)."""
    if not isinstance(problem, OtherProtocol):
        return None
    return SyncError(
        f"rank {rank}: pserver shard {shard} answers in protocol version {short(problem.theirs)}, "
        f"this worker speaks {PROTOCOL_VERSION}: it runs another release of distconv; "
        f"{SAME_RELEASE}"
    )
