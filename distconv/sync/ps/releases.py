"""Which distconv each end of a parameter-server job runs, and what its shards can do.

A worker's ``hello`` carries its build (:func:`~distconv.build_identity.build_id`), and a
shard's reply its own and the :data:`FEATURES` it has (fields an older peer ignores, so the
protocol version stays). The worker then says at setup what would otherwise surface later:

- A peer of another protocol version (:class:`OtherProtocol`): named with both versions and
  the way on, not as a "malformed reply".
- A shard of another build: each worker whose build differs from a shard's warns once at
  setup, naming the shards, and the job goes on, as MPI's start-up does
  (:mod:`distconv.sync.mpi.identity`): the hello's job check refuses a difference in what
  decides the training, and an edited comment must not stop a job. Workers do not compare
  builds with each other: a worker unlike the rest and the shards warns in its own log.
- In async mode, a shard whose features lack ``with_values``: refused at setup, where its first
  checkpoint failed the job, an epoch later. A shard that lists no features predates the list
  (the previous release has ``with_values``; older ones do not): the warning says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from distconv.build_identity import build_id
from distconv.sync.base import SyncError
from distconv.sync.ps.wire import PROTOCOL_VERSION, WireError, short

log = logging.getLogger("distconv.sync.ps")

#: what a shard of this release can do beyond its protocol version, in its hello reply:
#: ``with_values`` (a ``get_state`` that returns the blocks' values of the same moment) and
#: ``abandon`` (a worker's note that its step will not finish: :mod:`~distconv.sync.ps.endings`)
FEATURES = ("with_values", "abandon")
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


def version_error(theirs: Any) -> WireError:
    """The error for a header whose ``v`` is not this protocol version: another release's
    where it is an integer; else no distconv sent it (none, true, a string), and the error
    names what it read, not a release."""
    if type(theirs) is int:
        return OtherProtocol(theirs)
    return WireError(f"protocol version {short(theirs)}, expected {PROTOCOL_VERSION}")


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


def check_releases(
    replies: Sequence[Mapping[str, Any]],
    mode: str,
    rank: int,
    named: Callable[[Sequence[int]], str],
) -> None:
    """Check the shards' ``hello`` replies (shard 0 first) for their builds and features.

    Raises:
        SyncError: in async mode, a shard whose features lack ``with_values``.
    """
    listed = [h.get("features") for h in replies]
    if mode == "async":
        lacking = [
            s for s, f in enumerate(listed) if isinstance(f, list) and "with_values" not in f
        ]
        if lacking:
            raise SyncError(
                f"rank {rank}: pserver shard {named(lacking)} cannot return its values with its "
                "optimizer state (with_values), which an async job's checkpoints need: it runs "
                f"another release of distconv; {SAME_RELEASE}"
            )
    ours = build_id()
    other = [s for s, h in enumerate(replies) if h.get("build") != ours]
    if not other:
        return
    said = "; ".join(f"shard {named([s])}: {_build(replies[s], mode)}" for s in other)
    log.warning(
        "pserver shards run another distconv than this worker (%s): %s; the job goes on, but "
        "each runs its own code: %s",
        ours,
        said,
        SAME_RELEASE.replace("release", "build"),
    )


def _build(reply: Mapping[str, Any], mode: str) -> str:
    """A shard's build as its reply says it, and where it lists no features, that it predates
    the list (in async mode: what that may cost)."""
    build = reply.get("build")
    said = f"distconv {build}" if isinstance(build, str) else "no build said"
    if isinstance(reply.get("features"), list):
        return said
    older = ": if older than with_values, the first checkpoint fails" if mode == "async" else ""
    return f"{said} (from before shards listed their features{older})"
