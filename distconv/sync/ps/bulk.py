"""Bulk requests (a seed, a pull of every block, ``get_state``, ``set_state``) cut into
messages within each shard's ``--max-message-bytes``, and the check at setup that a layout's
blocks and pushes fit the shards' bounds: the worker's side of those caps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distconv.sync.base import SyncError


class BulkRuns:
    """The caps side of :class:`~distconv.sync.ps.channel.ShardChannel` (and, through it, of
    :class:`~distconv.sync.ps.client.PServerSync`, whose layout ``_check_sizes`` reads)."""

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

    def _check_sizes(self, frames: Sequence[int]) -> None:
        """Say now, not at the first step, when a shard cannot take this layout: a block is one
        frame (ZeroMQ drops a connection whose frame exceeds the shard's bound, and the worker
        would only time out), and a dense push carries all of a shard's blocks of a parameter."""
        for b in self.layout.blocks:
            s = self.layout.shard_of[b.id]
            if b.nbytes > frames[s]:
                raise SyncError(
                    f"rank {self.rank}: block {b.id} of {self.params[b.param].name} is "
                    f"{b.nbytes} bytes, more than the {frames[s]} a frame may hold on pserver "
                    f"{self.endpoints[s]} (its --max-frame-bytes, or --max-message-bytes where "
                    "smaller): raise that bound, or give PServerSync a smaller block_bytes"
                )
        for i, targets in enumerate(self._targets):
            if self._specs[i].sparse:  # a sparse push carries a batch's rows only
                continue
            for s, blocks in targets:
                size = sum(b.nbytes for b in blocks)
                if size > self._caps[s]:
                    raise SyncError(
                        f"rank {self.rank}: a push of {self.params[i].name} carries {size} "
                        f"bytes to pserver {self.endpoints[s]}, more than its "
                        f"--max-message-bytes {self._caps[s]}: use more shards or a larger cap"
                    )
        self._check_state_fits()  # a checkpoint moves a block's state in one message
