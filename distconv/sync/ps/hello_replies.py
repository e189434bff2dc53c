"""A worker's check of a shard's ``hello`` reply, before it reads any setting of it.

The reply must be readable (:func:`~distconv.sync.ps.job_hello.hello_reply_problem`: a
``mode`` of the shards' modes, integer counts, positive caps), and of the shard this worker
named at that position of ``--pservers``, set up for as many shards and workers as this job
has (:func:`~distconv.sync.ps.shard_layout.layout_mismatch` says which side's flag to
change). A reply refused here is refused before the worker beats the shard or takes any of its
settings (:meth:`~distconv.sync.ps.beats.HeartbeatOwner._ask_hellos`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from distconv.sync.base import SyncError
from distconv.sync.ps.job_hello import hello_reply_problem
from distconv.sync.ps.shard_layout import layout_mismatch


def check_hello_reply(
    shard: int,
    reply: Mapping[str, Any],
    *,
    endpoint: str,
    num_shards: int,
    workers: int,
    malformed: Callable[[int, str], SyncError],
) -> None:
    """Refuse shard ``shard``'s hello ``reply`` (the shard at ``endpoint``) where this worker
    cannot read it, or where it is not that shard of ``num_shards`` for ``workers`` workers.

    Raises:
        SyncError: ``malformed(shard, problem)``, the worker's error for a reply it cannot
            read (naming the shard, or another protocol's peer), or the layout mismatch,
            naming what the shard said, what this worker expects and the way out.
    """
    if (problem := hello_reply_problem(reply)) is not None:  # before any setting is read
        raise malformed(shard, f"hello reply: {problem}")
    expect = {"shard": shard, "num_shards": num_shards, "workers": workers}
    if (got := {k: reply.get(k) for k in expect}) != expect:
        raise SyncError(layout_mismatch(endpoint, got, expect))
