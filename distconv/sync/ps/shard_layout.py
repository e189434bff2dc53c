"""A worker's check that a shard is set up for its job's layout, and the way out it names.

A shard says in its ``hello`` reply which shard it is, of how many, for how many workers; a
worker expects its position in ``--pservers``, their count and its ``--world-size``. Each side
has its own flags (the shard's ``--shard``, ``--num-shards``, ``--workers``; the worker's
``--pservers``, ``--world-size``), so the refusal says which flag of which side to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def layout_mismatch(endpoint: str, got: Mapping[str, Any], expect: Mapping[str, int]) -> str:
    """The refusal of a shard at ``endpoint`` set up as ``got`` where this worker expects
    ``expect`` (each of ``shard``, ``num_shards``, ``workers``), with the way out. A reply
    that leaves one out is of a shard of another release, whose flags may be right: no flag of
    either side is the way out there (:func:`_release_way_out`)."""
    said = f"pserver {endpoint} is set up as {dict(got)}, this worker expects {dict(expect)}: "
    if (release := _release_way_out(got, expect)) is not None:
        return said + release
    ways = []
    if (got.get("shard"), got.get("num_shards")) != (expect["shard"], expect["num_shards"]):
        ways.append(
            f"give --pservers every shard's address in shard order ({expect['num_shards']} "
            f"given, this one at position {expect['shard']}), or restart the shards with "
            "--shard and --num-shards to match"
        )
    if (workers := got.get("workers")) != expect["workers"]:
        ways.append(
            f"restart the shards with --workers {expect['workers']}, or run {workers} workers "
            f"(--world-size {workers})"
        )
    return said + "; and ".join(ways)


def _release_way_out(got: Mapping[str, Any], expect: Mapping[str, int]) -> str | None:
    """The way out where the reply ``got`` names none of a setting ``expect`` holds (a shard
    of another release: 'run None workers', or restarting shards whose --workers was right,
    led nowhere); None where it names all."""
    absent = [key for key in expect if got.get(key) is None]
    if not absent:
        return None
    return (
        f"its hello reply names no {' or '.join(absent)} (a shard of another distconv "
        "release?): start the shards from the release the workers run"
    )
