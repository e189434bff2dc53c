"""A worker's memory of the shards it found gone, so that it asks them nothing more.

A wait finds a shard on this host gone when its process has ended (the process watch names it
once, then follows it no more). Every later request to it would wait the worker's whole limit
(1.5 x ``timeout``) again for an answer that cannot come: a script that catches the step's
error and evaluates, checkpoints or closes waited minutes, then said less than the first error
had. So the first cause is kept, by shard, and every later request to that shard, and every
wait on one sent before, is refused at once with it. A setup's ``hello`` asks every shard
afresh (a shard restarted meanwhile is served): the way on, besides a restart of the job.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from distconv.sync.base import SyncError
from distconv.sync.ps.stuck import wait_words

#: what a worker whose shard is gone can do: its blocks (values, optimizer state) went with it
WAY_ON = (
    "restart the shard, then set up again (a new fit: its setup says hello to every shard "
    "afresh), or restart the job, which resumes from its newest checkpoint"
)


class GoneShards:
    """The gone-shard side of :class:`~.channel.ShardChannel`; it reads the worker's ``rank``
    and ``endpoints``."""

    rank: int
    endpoints: list[str]
    #: shard -> why it was found gone (the first cause), until the next hello
    _gone: dict[int, str]

    def _found_gone(self, shard: int, cause: str) -> SyncError:
        """The error naming ``shard`` gone for ``cause``; the shard is asked nothing more."""
        self._gone.setdefault(shard, cause)
        return self._shard_error(shard, cause)

    def _refuse_gone(self, shards: Iterable[int], what: str) -> None:
        """SyncError at once where one of ``shards`` (-1: not known) was found gone: ``what``
        (a request not sent, or a wait on a reply) names what is refused."""
        gone = set(shards) & self._gone.keys()
        if gone:
            s = min(gone)
            said = f"{self._gone[s]} (found before), so {what} is refused at once; {WAY_ON}"
            raise self._shard_error(s, said)

    def _shard_error(self, shard: int, said: str) -> SyncError:
        """``said`` of ``shard``, named as this rank's messages name a shard."""
        return SyncError(
            f"rank {self.rank}: pserver shard {shard} ({self.endpoints[shard]}) {said}"
        )

    def _ask_gone_afresh(self) -> None:
        """Forget the shards found gone: a hello asks each afresh (one restarted answers)."""
        self._gone.clear()


def request_words(header: Mapping[str, Any]) -> str:
    """A request not sent as a refusal names it: a gather by what it is (``a metrics sum
    (allreduce:3)``), any other by its op (``its push``)."""
    tag = header.get("tag")
    return wait_words(tag) if isinstance(tag, str) and tag else f"its {header.get('op')}"
