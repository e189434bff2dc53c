"""Coalesced pushes: a worker's gradients for a shard leave together.

Each complete gradient is handed over at once (:meth:`PushQueue._queue_push`) to its shard's
queue. The queue goes as one message once it holds at least ``push_bytes`` of gradients and the
shard's previous push has left (ZeroMQ has let go of all of it: the ``MessageTracker`` of its
last frame, a ``zmq.Frame`` of its own so that pyzmq never copies it, is done); else it keeps
growing until the next gradient, or until :meth:`PushQueue._flush_pushes` at the end of the
step. There what is still queued is cut into messages of at least ``push_bytes`` (the default
:data:`PUSH_BYTES` when it is 0: 0 asks for each gradient to leave while the link is free, not for
one message per gradient at the end; the last message of a shard: what is left), as if each had gone
when it filled up, and the shards take turns: every shard has work at once, and the replies to the
first messages travel while the later ones are sent, as in a pipeline (one message of all that is
left would make each shard wait for the whole of it before it could start, and the worker for the
whole reply).

So a large model's gradients leave during backward, in messages that grow when the link is
slow (DDP's buckets, sized by the link as well as by a setting), while a small model's all
travel as one message per shard and step: on a busy machine the cost of a push is the Python
that handles each message at both ends, not its bytes. There is no Python thread to fight
backward for the GIL. No message holds more array bytes than the shard's cap. A sparse table's
push (rows, not blocks) always travels alone.

:class:`PushQueue` is a mixin of :class:`~distconv.sync.ps.client.PServerSync`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from distconv.sync.ps.blocks import BLOCK_BYTES, Block
from distconv.sync.ps.gradients import Item

#: default ``push_bytes``: one default block
PUSH_BYTES = BLOCK_BYTES


class Sent(NamedTuple):
    """A push awaiting its reply: the blocks the reply carries, in message order, and for a
    sparse table's push the row ids pushed of each block (its reply must list them)."""

    blocks: list[Block]
    rows: list[np.ndarray] | None = None


class PushQueue:
    """The pushes of the current step: queued per shard, and those sent awaiting replies."""

    def _init_push_queue(self, shards: int, push_bytes: int | None = None) -> None:
        #: per shard: (parameter index, its blocks there, their gradient arrays), in order
        self._queued: list[list[Item]] = [[] for _ in range(shards)]
        self._queued_bytes = [0] * shards
        self._last_push: list[Any] = [None] * shards  # MessageTracker of the last push
        #: the fewest queued gradient bytes that leave before the end of the step
        self.push_bytes = PUSH_BYTES if push_bytes is None else int(push_bytes)
        if self.push_bytes < 0:
            raise ValueError(f"push_bytes must be >= 0, got {push_bytes}")
        #: request id -> the push sent, awaiting its reply
        self._inflight: dict[int, Sent] = {}
        self.push_messages = 0

    def _queue_push(
        self, shard: int, param: int, blocks: list[Block], arrays: list[np.ndarray]
    ) -> None:
        """Queue one dense gradient's blocks for ``shard``; send the queue if the link is free."""
        size = sum(a.nbytes for a in arrays)
        if self._queued[shard] and self._queued_bytes[shard] + size > self._caps[shard]:
            self._send_queued(shard)
        self._queued[shard].append((param, blocks, arrays))
        self._queued_bytes[shard] += size
        if self._queued_bytes[shard] >= self.push_bytes:
            tracker = self._last_push[shard]
            if tracker is None or tracker.done:
                self._send_queued(shard)

    def _drop_pushes(self) -> None:
        """Forget the pushes of a step cut short (an error or a second Ctrl-C before its
        ``finish_step``): the next step sent its queued gradients again beside its own, which
        a shard refuses ("parameters ... repeat"), and waited for its replies, whose values
        predate the next setup's seed."""
        for shard in range(len(self._queued)):
            self._queued[shard], self._queued_bytes[shard] = [], 0
        inflight, self._inflight = self._inflight, {}
        self._drop_replies(set(inflight))
        self._keep_sent_gradients()

    def _keep_sent_gradients(self) -> None:
        """A push goes without a copy: until it has left (its tracker is done), ZeroMQ reads
        the gradients' own memory. One of a dropped step still on its way then carried what
        was written there next (the next step's gradient, a fit's ``zero_grad``), and the shard
        applied that. So while any has not left, each dense host gradient moves to a copy of
        its own, and the push keeps the memory it was sent with (the next setup lays the
        gradients out again)."""
        if all(t is None or t.done for t in self._last_push):
            return
        for p in self.params:
            if isinstance(p.grad, np.ndarray) and not p.sparse_rows:  # sparse rows go as copies
                p.grad = p.grad.copy()

    def abandon_step(self) -> None:
        """The step ends unfinished (see the contract): its pushes are let go of, as a setup
        lets go of them. Its queued gradients went out with the next step's, which the shard
        refused ("parameters [0, 0] are none or repeat"); one sent already is applied by its
        shard with the gradients it was sent with (:meth:`_keep_sent_gradients`). Must not
        raise."""
        self._drop_pushes()
        super().abandon_step()  # type: ignore[misc]  # the step's order ends too (StepOrder)

    def _flush_pushes(self) -> None:
        """Send whatever is still queued (the end of the step): each shard's queue in messages
        of at least ``push_bytes`` (:data:`PUSH_BYTES` when it is 0), the shards taking turns
        (see the module)."""
        runs = [self._cut_queue(shard) for shard in range(len(self._queued))]
        for k in range(max(map(len, runs), default=0)):
            for shard, run in enumerate(runs):
                if k < len(run):
                    self._send_items(shard, run[k])

    def _cut_queue(self, shard: int) -> list[list[Item]]:
        """Take ``shard``'s queue, cut into consecutive runs of at least ``push_bytes`` (or
        :data:`PUSH_BYTES`) each (the last: what is left); each within the cap, as the whole
        queue is."""
        queued, self._queued[shard], self._queued_bytes[shard] = self._queued[shard], [], 0
        runs: list[list[Item]] = []
        # push_bytes 0 means "send each gradient while the link is free", not n messages here
        size = cut = self.push_bytes or PUSH_BYTES
        for item in queued:
            if size >= cut:
                runs.append([])
                size = 0
            runs[-1].append(item)
            size += sum(a.nbytes for a in item[2])
        return runs

    def _send_queued(self, shard: int) -> None:
        queued = self._queued[shard]
        self._queued[shard], self._queued_bytes[shard] = [], 0
        self._send_items(shard, queued)

    def _send_items(self, shard: int, queued: list[Item]) -> None:
        """Send queued gradients to ``shard`` as one push (nothing if there are none)."""
        if not queued:
            return
        # ascending parameters: their blocks then lie back to back in the shard's store, so
        # its reply is one slice of it, not a concatenation (see distconv.sync.ps.values)
        queued.sort(key=lambda q: q[0])
        blocks = [b for _, bl, _ in queued for b in bl]
        # gradients back to back in the shard's buffer go as one frame (protocol 4)
        arrays = self._runs_of_gradients.frames(queued, self._frame_bytes[shard])
        self._push_message(shard, [p for p, _, _ in queued], blocks, arrays)

    def _push_message(
        self,
        shard: int,
        params: list[int],
        blocks: list[Block],
        arrays: Sequence[np.ndarray],
        rows: list[int] | None = None,
    ) -> None:
        """Send one push of ``params`` (their blocks on ``shard``, in order); ``rows`` for a
        sparse table's push (one count per block, ``[ids, rows]`` arrays per block)."""
        head: dict[str, Any] = {
            "op": "push",
            "step": self._step,
            "count": self._examples,
            "lr": self.optimizer.lr,
            "params": params,
            "blocks": [b.id for b in blocks],
            "versions": [self._versions[b.id] for b in blocks],
        }
        if rows is not None:
            head["rows"] = rows
        rid = self._send(shard, head, arrays, track=True)
        self._last_push[shard] = self._trackers.pop(shard, None)
        self._inflight[rid] = Sent(blocks, None if rows is None else list(arrays[::2]))
        self.push_messages += 1
