"""A worker's dense host gradients in one buffer per shard and dtype: a push is one frame.

Protocol 4 lets a dense push carry its gradients as ``uint8`` *gradient runs*: the bytes of one
or more whole consecutive blocks back to back, in the push's ``blocks`` order
(``docs/protocol.md``, "Gradient runs"). ZeroMQ sends each frame without a copy, but every frame
costs tens of microseconds of pyzmq bookkeeping at both ends (its buffer is registered with
pyzmq's garbage-collector thread, which then takes the GIL to release it); a 16 MB step of 100
parameters spent more on that than on the bytes.

So at :meth:`~distconv.sync.ps.client.PServerSync.setup` each dense host parameter whose blocks
all live on one shard gets its gradient moved into that shard's buffer for its dtype, in
parameter order, and ``param.grad`` becomes a view of its slice: the layers add straight into
it, as they do into an allreduce bucket (``distconv/sync/base.py`` allows a strategy to hand out
gradient views). Parameters queued together for a shard (in ascending order, as the outbox sends
them) are then consecutive there, and :meth:`GradientRuns.frames` sends them as one frame. Any
other parameter (a device array, a sparse table, one spanning shards, a gradient of another
dtype than its value) keeps its own gradient and goes as one frame per block, as before; so does
a moved one whose ``param.grad`` was replaced after setup (``Parameter.set_static``, ``cast``):
its queued arrays are then not the buffer's bytes, and what it sends is what the layers wrote.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from distconv.parameter import Parameter
from distconv.sync.ps.blocks import Block

#: a queued gradient: its parameter's index, its blocks on the shard, their gradient arrays
Item = tuple[int, list[Block], list[np.ndarray]]


class GradientRuns:
    """Where each moved gradient lives: a buffer and a byte range in it.

    Args:
        params: the job's parameters; the gradients of those moved are rebound here.
        shards: per parameter, the shards holding its blocks.
        movable: per parameter, whether its gradient may move (a dense host array).
    """

    def __init__(
        self, params: Sequence[Parameter], shards: Sequence[set[int]], movable: Sequence[bool]
    ) -> None:
        groups: dict[tuple[int, np.dtype], list[int]] = {}
        for i, p in enumerate(params):
            # the shard reads a gradient in its parameter's dtype: another dtype cannot share
            if movable[i] and len(shards[i]) == 1 and params[i].grad.dtype == params[i].value.dtype:
                groups.setdefault((min(shards[i]), p.grad.dtype), []).append(i)
        self.where: dict[int, tuple[np.ndarray, int, int]] = {}
        #: where each moved gradient's bytes start in memory (ndarray.ctypes costs microseconds)
        self._address: dict[int, int] = {}
        for members in groups.values():
            buf = np.zeros(sum(params[i].grad.nbytes for i in members), np.uint8)
            at = 0
            for i in members:
                grad = params[i].grad
                view = buf[at : at + grad.nbytes].view(grad.dtype).reshape(grad.shape)
                view[...] = grad
                params[i].grad = view
                self.where[i] = (buf, at, at + grad.nbytes)
                self._address[i] = address_of(view)
                at += grad.nbytes

    def frames(self, items: Sequence[Item], limit: int) -> list[np.ndarray]:
        """The array frames of one push of ``items`` (in the push's order): each run of moved
        gradients back to back in one buffer as one ``uint8`` frame of at most ``limit`` bytes
        (the shard's frame bound), any other gradient one frame per block."""
        frames: list[np.ndarray] = []
        run: list | None = None  # [buffer, start, stop] of the run being built
        for i, _, arrays in items:
            where = self._moved(i, arrays, limit)
            if run and where and where[0] is run[0] and where[1] == run[2]:
                if where[2] - run[1] <= limit:
                    run[2] = where[2]
                    continue
            if run:
                frames.append(run[0][run[1] : run[2]])
            run = list(where) if where else None
            if where is None:
                frames.extend(arrays)
        if run:
            frames.append(run[0][run[1] : run[2]])
        return frames

    def _moved(
        self, i: int, arrays: Sequence[np.ndarray], limit: int
    ) -> tuple[np.ndarray, int, int] | None:
        """Where parameter ``i``'s queued gradient lies in a buffer, or None when it must go
        as its own ``arrays``, one frame per block: it was never moved, it is larger than a
        frame may be, or ``param.grad`` was replaced after setup (``set_static``, ``cast``), so
        its arrays are no longer the buffer's bytes (one pointer compare, not a scan)."""
        where = self.where.get(i)
        if where is None or where[2] - where[1] > limit or not arrays:
            return None
        if address_of(arrays[0]) != self._address[i]:
            return None
        return where


def address_of(array: np.ndarray) -> int:
    """Where ``array``'s first byte lies in memory."""
    return array.__array_interface__["data"][0]
