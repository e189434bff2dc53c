"""A shard's block values in one contiguous buffer per dtype, and dense replies as one frame.

Protocol 3 sends the new values of a reply's blocks as ONE ``uint8`` frame: each block's bytes
back to back, in the request's ``blocks`` order, so each side handles one frame per reply
instead of one per block (a frame costs tens of microseconds of Python and of ZeroMQ's
bookkeeping; a 16 MB step of 100 blocks spent more on that than on the bytes).

The shard keeps its blocks in id order inside one buffer per dtype (each block's ``value`` a
view of it). Blocks consecutive there (a push of consecutive parameters, which the reference
worker sends in ascending order, or a pull of a run of blocks) are one slice of that buffer, and
the reply may hand ZeroMQ that slice itself, LENT: the ``MessageTracker`` of the reply is kept
(:meth:`ValueStore.lend`), and before an in-place update of blocks (:meth:`ValueStore.before_write`)
that a lent reply ZeroMQ still holds carries, the store moves that dtype's buffer to a fresh copy
(copy on write; buffers of other dtypes, or with no held reply on the blocks written, stay), so a
reply still carries the values it was built from, as the protocol promises.

Lending pays where no update of a lent reply's blocks can come before ZeroMQ has let go of it:
in sync mode (the next update of a block needs every worker's next push, sent after the worker
read its replies) and in async mode with ONE worker (its next push of a block follows its read of
the reply). There the copy a reply used to cost is gone. In async mode with several workers,
another worker's push of the same blocks can arrive while ZeroMQ still holds a reply, and lending
would then copy a whole buffer for a reply of a few blocks; so the shard asks :meth:`frame` for a
snapshot of the reply's bytes instead (protocol 3's copy) and lends nothing. Any reply of blocks
that are not consecutive gets them concatenated (a new array, nothing lent).
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
        self._blocks = blocks
        self._buffer: dict[int, np.ndarray] = {}
        self._start: dict[int, int] = {}
        self._stop: dict[int, int] = {}
        #: replies that carry a slice of a buffer: (buffer, start, stop, MessageTracker)
        self._lent: list[tuple[np.ndarray, int, int, Any]] = []
        at = dict.fromkeys(sizes, 0)
        for bid in sorted(blocks):
            value = blocks[bid].value
            buf, start = self.buffers[value.dtype], at[value.dtype]
            self._start[bid], self._stop[bid] = start, start + value.nbytes
            self._place(bid, buf)[...] = value
            at[value.dtype] = self._stop[bid]

    def _place(self, bid: int, buf: np.ndarray) -> np.ndarray:
        """Make block ``bid``'s value the view of its bytes in ``buf``; returns the view."""
        b = self._blocks[bid]
        view = buf[self._start[bid] : self._stop[bid]].view(b.value.dtype).reshape(b.value.shape)
        b.value, self._buffer[bid] = view, buf
        return view

    def owns(self, array: np.ndarray) -> bool:
        """Whether ``array`` is a slice of one of the store's buffers (what a reply lends)."""
        return any(array.base is buf for buf in self.buffers.values())

    def lend(self, array: np.ndarray, tracker: Any) -> None:
        """A reply carrying ``array``, a slice of a buffer, went to ZeroMQ with ``tracker``
        (anything with a ``done`` attribute that turns True once ZeroMQ has let go)."""
        self._prune()  # pull-only traffic calls no before_write: keep the list short here too
        start = array.ctypes.data - array.base.ctypes.data
        self._lent.append((array.base, start, start + array.nbytes, tracker))

    @property
    def lent(self) -> int:
        """How many lent replies ZeroMQ may still hold (those not yet seen done)."""
        return len(self._lent)

    def _prune(self) -> None:
        """Forget lent replies ZeroMQ has let go of, and those of buffers the store left."""
        current = {id(buf) for buf in self.buffers.values()}
        self._lent = [lent for lent in self._lent if id(lent[0]) in current and not lent[3].done]

    def before_write(self, ids: Sequence[int]) -> bool:
        """Call before blocks ``ids`` change in place: each buffer holding bytes of any of
        them that a lent reply ZeroMQ still holds carries moves to a fresh copy (its blocks
        become views of the copy; the old buffer stays with the replies). Other buffers stay.

        Returns:
            Whether any buffer moved (a copy of that dtype's buffer each).
        """
        if not self._lent:
            return False
        self._prune()
        held = {
            id(buf)
            for buf, start, stop, _ in self._lent
            for bid in ids
            if buf is self._buffer[bid] and start < self._stop[bid] and self._start[bid] < stop
        }
        if not held:
            return False
        fresh = {id(buf): buf.copy() for buf in self.buffers.values() if id(buf) in held}
        self.buffers = {d: fresh.get(id(buf), buf) for d, buf in self.buffers.items()}
        for bid in self._blocks:
            if id(self._buffer[bid]) in fresh:
                self._place(bid, fresh[id(self._buffer[bid])])
        self._prune()
        return True

    def frame(self, ids: Sequence[int], copy: bool = False) -> np.ndarray:
        """The values of blocks ``ids`` (held here, checked by the caller) as one ``uint8``
        array, back to back in ``ids`` order: a view of the store when they are consecutive in
        one buffer and ``copy`` is False, else a new array.

        Args:
            ids: block ids, in the order of the reply.
            copy: return a snapshot even when a view would do (a view sent in a reply must be
                :meth:`lend`-ed, so that an update while ZeroMQ still holds it copies first;
                see the module for when the shard asks for a snapshot instead).
        """
        if not ids:
            return np.empty(0, np.uint8)
        buf = self._buffer[ids[0]]
        start = stop = self._start[ids[0]]
        for bid in ids:
            if self._buffer[bid] is not buf or self._start[bid] != stop:
                return np.concatenate([self._bytes(b) for b in ids])
            stop = self._stop[bid]
        view = buf[start:stop]
        return view.copy() if copy else view

    def _bytes(self, bid: int) -> np.ndarray:
        return self._buffer[bid][self._start[bid] : self._stop[bid]]
