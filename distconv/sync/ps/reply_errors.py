"""What a shard's error reply raises in the worker that asked: the reply's fields say whose
failure it is (``docs/protocol.md``, requests and replies), and so how ``distconv train`` exits.

- ``failed_ranks`` naming other ranks than this one, or ``stopped_shard`` (a shard that failed
  the job on its own SIGTERM while this worker trained on: a node drain, a rolling restart):
  :class:`~distconv.sync.peers.PeerFailed`, exit 75, "try again": the cause is elsewhere;
- ``refused: "job"``: :class:`~distconv.sync.errors.JobRefused`, the user's configuration;
- ``late`` beside ``failed_ranks`` (shard 0's answer to a job check that ranks are late to):
  :class:`~distconv.sync.ps.late_ranks.RanksLate`, which the job check waits out
  (:func:`late_reply_error`);
- anything else (a protocol error, a shard's own bug): :class:`SyncError`, exit 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distconv.sync.base import SyncError
from distconv.sync.errors import JobRefused
from distconv.sync.peers import PeerFailed, failed_peers, told_of_in
from distconv.sync.ps.job_hello import REFUSED_JOB
from distconv.sync.ps.late_ranks import LATE_FIELD, RanksLate


def reply_error(message: str, header: Mapping[str, Any], rank: int) -> SyncError:
    """The error for the error reply ``header`` to a request of ``rank``, whose ``message``
    names the rank, the request, the shard and its text (see the module)."""
    peers = failed_peers(header.get("failed_ranks"), rank)
    stopped = stopped_shard(header.get("stopped_shard"))
    if peers or stopped is not None:
        return PeerFailed(message, peers, stopped_shard=stopped)
    return shard_error(message, header.get("refused"))


def late_reply_error(message: str, header: Mapping[str, Any], rank: int) -> SyncError:
    """:func:`reply_error`, a :class:`~distconv.sync.ps.late_ranks.RanksLate` where the
    reply names other ranks late to the job check (its ``late`` field beside
    ``failed_ranks``)."""
    error = reply_error(message, header, rank)
    late = header.get(LATE_FIELD)
    if type(error) is PeerFailed and error.stopped_shard is None and type(late) is list:
        return RanksLate(message, error.ranks)
    return error


def stopped_shard(field: object) -> int | None:
    """The shard an error reply's ``stopped_shard`` field names, or None: absent (another
    failure, an older shard) or not a shard's index (a reply of another service: no shard's
    stop to blame, so the worker exits 1 on the reply's words, as before the field)."""
    return field if type(field) is int and field >= 0 else None


def shard_error(message: str, refused: Any) -> SyncError:
    """The error for a shard's error reply (``message`` names the rank, the request, the shard
    and its text) whose ``refused`` field is ``refused``:
    :class:`~distconv.sync.errors.JobRefused` where the shard refused the job
    (:data:`~distconv.sync.ps.job_hello.REFUSED_JOB`: the user's configuration, one line from
    :func:`~distconv.distributed.run_main`), marked with the rank whose failure it tells of
    where it does (:func:`~distconv.sync.peers.told_of_in`), else :class:`SyncError` (a
    protocol error or a shard's bug, whose traceback the user needs; and a shard without the
    field)."""
    if refused == REFUSED_JOB["refused"]:
        return JobRefused(message, told_of=told_of_in(message))
    return SyncError(message)
