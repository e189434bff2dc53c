"""The worker's pulls of the parameter server: every block's values, after a setup (ranks but
the chief); in async mode at a refresh, where other workers moved the shards on; in sync mode
at a refresh, the sparse tables of a rank but the chief, whose replies carried only its rows.

:class:`Pulls` is a mixin of :class:`~distconv.sync.ps.client.PServerSync`: it reads the
layout and sockets the worker keeps, and asks through its channel (:mod:`.channel`).
"""

from __future__ import annotations

from typing import Any

from distconv.sync.ps.sums import carries_union


class Pulls:
    """Pull every block, or in async mode only where a shard's stats moved since the last
    pull (a worker's own step, another's update, a seed, a failure), or in sync mode the
    sparse tables a step left current only in this rank's rows."""

    def refresh_parameters(self) -> None:
        """In async mode, pull every block, which other workers moved on (a job's only worker
        pulls only after a step of its own cut short: the shards may hold its pushes). With no
        step since its last pull, only where a shard's ``stats`` moved: any worker's update, a
        seed, a failure (a checkpoint right after the epoch's refresh pulls nothing).

        In sync mode, a rank but the chief pulls its sparse tables whole after a step: each
        step's reply carried only the rows it pushed (:func:`.sums.reply_rows`), so the rows
        only other ranks read are behind in its copy. Dense parameters and the chief's tables
        are current after every step: nothing to pull."""
        if self.mode == "sync":
            if self.sparse and not carries_union(self.rank) and self._stamps_at_pull is None:
                # None: a step since the last pull; [] for the stamps: sync compares none, so
                # no shard is asked for its stats (one holding no sparse block is not asked)
                self._pull_all([], sparse_only=True)
            return
        if self.mode != "async" or (self.world_size == 1 and not self._lagging):
            return
        if (stamps := self._stamps()) != self._stamps_at_pull:  # None after a step of its own
            self._pull_all(stamps)  # a failed shard's too: the pull is refused with the failure

    def _stamps(self, before: str = "pull") -> list[tuple[Any, ...]]:
        """Each shard's failure (a pull is refused with it), seed and count of value updates;
        a silent shard is named as asked for stats ``before`` that request (a checkpoint's
        ``get_state``: it pulls nothing)."""
        asks = [(s, {"op": "stats"}, ()) for s in range(len(self._socks))]
        replies = self._ask_all(asks, before, stoppable=True, asked="stats")  # named as such
        stamps = []
        for s, (h, _) in enumerate(replies):
            counts = h.get("stats")
            if not isinstance(counts, dict) or type(counts.get("updates")) is not int:
                raise self._malformed(s, "stats reply without its 'updates' count")
            stamps.append((h.get("failed"), h.get("seed"), counts["updates"]))
        return stamps

    def _pull_all(
        self, stamps: list[tuple[Any, ...]] | None = None, sparse_only: bool = False
    ) -> None:
        """Pull every block's values (``sparse_only``: the sparse tables' blocks), in requests
        within the shards' caps, after ``stamps``."""
        stamps = self._stamps() if stamps is None else stamps  # a later update: pulled next time
        runs = []
        for s in range(len(self._socks)):
            blocks = self.layout.blocks_on(s)
            if sparse_only:  # a shard holding none is not asked: a round trip for nothing
                if not (blocks := [b for b in blocks if self._specs[b.param].sparse]):
                    continue
            runs += [(s, run) for run in self._runs(s, blocks, [b.nbytes for b in blocks])]
        asks = [(s, {"op": "pull", "blocks": [b.id for b in run]}, ()) for s, run in runs]
        # every worker of an async job pulls at once: each reply crosses with theirs
        sizes = [sum(b.nbytes for b in run) * self.world_size for _, run in runs]
        # stoppable: a shard answers a pull at once, so one silent past a stop's patience is gone
        replies = self._ask_all(asks, "pull", stoppable=True, link_bytes=sizes)
        self._write_all([(run, arrays, h) for (_, run), (h, arrays) in zip(runs, replies)])
        self._lagging = False
        self._stamps_at_pull = stamps
