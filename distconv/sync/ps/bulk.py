"""Bulk requests (a seed, a pull of every block, ``get_state``, ``set_state``) cut into
messages within each shard's ``--max-message-bytes``: the worker's side of that cap."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distconv.sync.base import SyncError


class BulkRuns:
    """The caps side of :class:`~distconv.sync.ps.channel.ShardChannel`."""

    def _set_caps(self, caps: Sequence[int]) -> None:
        """Each shard's ``--max-message-bytes`` (from its ``hello`` reply): the most array bytes
        one request to it, or one reply from it, may hold."""
        self._caps = list(caps)
        self._reply_caps = dict(zip(self._socks, self._caps))

    def _runs(self, shard: int, items: Sequence[Any], sizes: Sequence[int]) -> list[list[Any]]:
        """``items`` cut into consecutive runs whose ``sizes`` (array bytes) add up to at most
        the shard's cap: one request each. The cap counts array frames only (the header is
        bounded apart, by ``MAX_HEADER_BYTES``), so a run may fill it exactly.

        Returns ``[[]]`` for no items: the request still goes (and the shard says what is wrong).

        Raises:
            SyncError: one item alone is larger than the cap.
        """
        cap = self._caps[shard]
        runs: list[list[Any]] = []
        size = cap + 1
        for item, n in zip(items, sizes):
            if n > cap:
                raise SyncError(
                    f"rank {self.rank}: a block needs {n} bytes in one message, more than the "
                    f"{cap} of --max-message-bytes of pserver {self.endpoints[shard]}: raise "
                    "that bound, or give PServerSync a smaller block_bytes"
                )
            if size + n > cap:
                runs.append([])
                size = 0
            runs[-1].append(item)
            size += n
        return runs or [[]]
