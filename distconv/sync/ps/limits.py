"""The bound a shard's counts keep, and the staleness bound's default and refusal, apart from
the shard's code: ``distconv.sync.ps.config`` loads the wire format (numpy and pyzmq), and the
launcher reads ``--max-staleness`` against the same bound before it needs either (a usage
error above all). This module imports nothing, nor do the packages above it
(``distconv.sync`` loads its transports lazily)."""

from __future__ import annotations

#: the largest count a shard tells its workers in ``hello`` (``workers``, ``max_staleness``,
#: the byte caps...): a 64-bit int, as msgpack carries it; a larger one (an extra digit, or
#: ``--max-staleness`` 10**20 for "never drop") could not be packed, and every hello was
#: answered "shard error: OverflowError", naming no flag
MAX_SETTING = 2**63 - 1

#: the staleness bound of a shard not given ``--max-staleness``, which its hello tells in
#: either mode (a sync shard reads none)
DEFAULT_MAX_STALENESS = 4


def staleness_in_sync(max_staleness: object) -> str:
    """The refusal of ``--max-staleness max_staleness`` for a sync job's shards, which read it
    nowhere: taken, it let a run that forgot ``--mode async`` train sync at every bound."""
    return (
        f"--max-staleness {max_staleness} is for --mode async; a sync step takes every "
        "worker's push of that step, so none is stale"
    )
