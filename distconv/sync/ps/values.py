"""A shard's block values in one contiguous buffer per dtype, and dense replies as one frame.

Protocol 3 sends the new values of a reply's blocks as ONE ``uint8`` frame: each block's bytes
back to back, in the request's ``blocks`` order, so each side handles one frame per reply
instead of one per block (a frame costs tens of microseconds of Python and of ZeroMQ's
bookkeeping; a 16 MB step of 100 blocks spent more on that than on the bytes).

The shard keeps its blocks in id order inside one buffer per dtype (each block's ``value`` a
view of it). Blocks consecutive there (a push of consecutive parameters, which the reference
worker sends in ascending order, or a pull of a run of blocks) are one slice of that buffer:
:meth:`ValueStore.frame` returns that slice itself, and the shard's reply copies it straight
into ZeroMQ's message (:meth:`~distconv.sync.ps.server.Shard._reply`), so a reply carries the
values of the moment it was sent, whatever updates come while ZeroMQ still holds it. (Lending
the slice to ZeroMQ instead, copy-on-write while ZeroMQ held it, cost more: pyzmq's
garbage-collector thread took the GIL from the shard's loop for every reply; see
``docs/benchmarks-history.md``.) Any reply of blocks that are not consecutive gets them
concatenated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


class ValueStore:
    """Where each block's value lives: a dtype's buffer and a byte offset in it.

    Args:
        blocks: block id -> a block with a C-contiguous ``value`` (the shard's ``_Block``);
            each ``value`` is copied into the store and replaced by a view of it.
    """

    def __init__(self, blocks: Mapping[int, Any]) -> None:
        sizes: dict[np.dtype, int] = {}
        for bid in sorted(blocks):
            v = blocks[bid].value
            sizes[v.dtype] = sizes.get(v.dtype, 0) + v.nbytes
        self.buffers = {dtype: np.empty(n, np.uint8) for dtype, n in sizes.items()}
        self._buffer: dict[int, np.ndarray] = {}
        self._start: dict[int, int] = {}
        self._stop: dict[int, int] = {}
        at = dict.fromkeys(sizes, 0)
        for bid in sorted(blocks):
            b = blocks[bid]
            buf, start = self.buffers[b.value.dtype], at[b.value.dtype]
            stop = start + b.value.nbytes
            view = buf[start:stop].view(b.value.dtype).reshape(b.value.shape)
            view[...] = b.value
            b.value = view
            self._buffer[bid], self._start[bid], self._stop[bid] = buf, start, stop
            at[b.value.dtype] = stop

    def frame(self, ids: Sequence[int]) -> np.ndarray:
        """The values of blocks ``ids`` (held here, checked by the caller) as one ``uint8``
        array, back to back in ``ids`` order: a view of the store when they are consecutive in
        one buffer (valid until the next update: send a copy of it), else a new array."""
        if not ids:
            return np.empty(0, np.uint8)
        buf = self._buffer[ids[0]]
        start = stop = self._start[ids[0]]
        for bid in ids:
            if self._buffer[bid] is not buf or self._start[bid] != stop:
                return np.concatenate([self._bytes(b) for b in ids])
            stop = self._stop[bid]
        return buf[start:stop]

    def _bytes(self, bid: int) -> np.ndarray:
        return self._buffer[bid][self._start[bid] : self._stop[bid]]
