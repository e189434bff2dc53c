"""Replies into parameters: a reply's values frame (or a sparse reply's rows) written into the
worker's parameters, through a host copy for a parameter on a GPU.

A dense reply carries its blocks' values as one frame, back to back in the order the blocks
were asked for (``docs/protocol.md``, "The values frame"); every block's offset follows from the
block table, so the frame's size is checked before anything is copied, and each block is one
slice copy, with no per-block frame or header.

:class:`ReplyWriter` is a mixin of :class:`~distconv.sync.ps.client.PServerSync`.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from distconv.backend import all_finite, copy_into, is_gpu_array, to_host
from distconv.notes import add_note
from distconv.sync.base import SyncError
from distconv.sync.ps.blocks import Block, rows_view
from distconv.sync.ps.gradients import address_of
from distconv.sync.ps.wire import (
    WireError,
    check_row_ids,
    check_rows,
    int_list,
    packed_values,
    short,
)

#: the largest block version a reply may carry: an int64, as every header integer a shard reads
MAX_VERSION = 2**63 - 1


class NotFinite(WireError):
    """A reply's values hold a NaN or inf: well formed, and refused all the same."""


@dataclass(frozen=True)
class RowsPushed:
    """What a sparse push's reply must list: each block's row ids pushed (``ids``), among
    other ranks' rows where ``union`` (sync mode), else those alone (async mode).

    In sync mode a shard answers the chief with the union of the ranks' rows (the table its
    checkpoints write stays whole) and any other rank with its own rows
    (:func:`.sums.reply_rows`); a shard of an earlier release of the same protocol version
    answers every rank with the union. Either is the shards' values of that step in every row
    it lists, so a worker takes either: refusing the union failed a job of this worker on such
    shards at its first sparse step, after the step was applied."""

    ids: Sequence[np.ndarray]
    union: bool


class ReplyWriter:
    """The reply side of :class:`~distconv.sync.ps.client.PServerSync`."""

    def _host_rows(self, i: int) -> np.ndarray:
        """Parameter ``i``'s values as rows: the array itself on CPU, a host copy on a GPU."""
        p = self.params[i]
        if is_gpu_array(p.value):
            if p.name not in self._host:
                self._host[p.name] = to_host(p.value)
            return rows_view(self._host[p.name], self._specs[i])
        return rows_view(p.value, self._specs[i])

    def _write(
        self,
        blocks: Sequence[Block],
        arrays: Sequence[np.ndarray],
        reply,
        pushed: Sequence[np.ndarray] | None = None,
    ) -> set[int]:
        """Write a push's reply: whole blocks from its one frame of values (checked for its
        size before any copy), or, to a sparse push (``pushed``: the row ids it pushed of each
        block), ``[ids, rows]`` pairs listing every row pushed (see :class:`RowsPushed`).

        Returns the indices of the parameters written.

        Raises:
            SyncError: the reply's versions or values do not fit the blocks asked for, it
                lists rows for a dense push, or whole blocks or other rows for a sparse one,
                or its ``dropped`` is no count of the parameters pushed (the caller adds it
                to ``drops``).
        """
        asked = None if pushed is None else RowsPushed(pushed, self.mode == "sync")
        versions = self._check_reply(blocks, arrays, reply, asked)
        params, dropped = len({b.param for b in blocks}), reply.get("dropped", 0)
        if type(dropped) is not int or not 0 <= dropped <= params:  # a bool is no count
            problem = f"dropped {short(dropped)}, not a count of the {params} parameters pushed"
            raise self._unfit(blocks, WireError(problem))
        return self._put(blocks, arrays, reply, versions)

    def _write_all(
        self,
        replies: Sequence[tuple[Sequence[Block], Sequence, dict]],
        rows_asked: Sequence[Sequence[np.ndarray]] | None = None,
        finite: bool = True,
    ) -> None:
        """Write several replies (``(blocks, arrays, reply)``) to pulls, every one checked before
        any is written: a malformed reply of a later shard refused after an earlier shard's
        values were written left the parameters half of another moment; then move the
        parameters written to the device, even if a write fails, so the device holds what the
        host copies do. ``rows_asked``: per reply, the row ids asked for of each block (a
        prefetch); None: whole blocks (a pull of every block, a ``get_state``'s values).
        ``finite``: check every value finite (:meth:`_check_finite`); a checkpoint's
        ``get_state`` checks what it writes itself, and says so in its own words.

        Raises:
            SyncError: a reply's versions or values do not fit its blocks, or it holds other
                rows than asked for, or rows where whole blocks were, or (``finite``) a NaN
                or inf; nothing is written.
        """
        asked = rows_asked if rows_asked is not None else [None] * len(replies)
        versions = [self._check_reply(*r, a, finite) for r, a in zip(replies, asked)]
        written: set[int] = set()
        with self._to_device_after(written):
            for (blocks, arrays, reply), v in zip(replies, versions):
                written |= self._put(blocks, arrays, reply, v)  # in place: the set moved after

    def _check_reply(
        self,
        blocks: Sequence[Block],
        arrays: Sequence[np.ndarray],
        reply,
        asked: Any,
        finite: bool = True,
    ) -> list:
        """The reply's versions, once they and its values are found to fit ``blocks`` and what
        was ``asked``: each block's row ids, None for whole blocks, or :class:`RowsPushed`;
        with ``finite``, the values all finite too.

        Raises:
            SyncError: they do not, naming the shard.
        """
        try:
            versions = int_list(reply, "versions") if "versions" in reply else []
            if len(versions) != len(blocks):
                raise WireError(f"{len(versions)} versions for {len(blocks)} blocks")
            if versions and not 0 <= min(versions) <= max(versions) <= MAX_VERSION:
                # kept, it went back in the next push, which the shard refused as the worker's
                raise WireError(f"versions must be integers from 0 to {MAX_VERSION}")
            if ("rows" in reply) != (asked is not None):
                raise WireError(
                    "rows where whole blocks were asked for"
                    if asked is None
                    else "whole blocks where rows were asked for"
                )
            if "rows" in reply:
                counts = int_list(reply, "rows")
                self._check_rows(blocks, arrays, counts)
                _check_rows_as_asked(blocks, arrays[::2], counts, asked)
                rows = (([b], v.reshape(-1).view(np.uint8)) for b, v in zip(blocks, arrays[1::2]))
                self._check_finite(rows if finite else ())
            else:
                values = packed_values(arrays, sum(b.nbytes for b in blocks))
                self._check_finite(self._dense_runs(blocks, values) if finite else ())
        except NotFinite as exc:  # well formed: no "malformed reply", but what to do
            raise SyncError(f"rank {self.rank}: {exc}{self._from_shard(blocks)}") from None
        except WireError as exc:
            raise self._unfit(blocks, exc) from None
        return versions

    def _check_finite(self, runs: Iterable[tuple[Sequence[Block], np.ndarray]]) -> None:
        """:class:`NotFinite` unless every value of a reply is finite, naming its block: a NaN
        or inf written in went into every later forward pass, found at a checkpoint if at all.
        ``runs``: blocks of one dtype and their bytes (:meth:`_dense_runs`), each read in one
        pass; its cost is measured by ``benchmarks/pserver.py --finite`` (docs/protocol.md)."""
        for run, data in runs:
            dtype = self._dtype(run[0])
            if all_finite(data.view(dtype)):
                continue
            parts = [data] if len(run) == 1 else _block_slices(run, data)
            b = next(b for b, v in zip(run, parts) if not all_finite(v.view(dtype)))
            raise NotFinite(
                f"non-finite values (NaN or inf) for parameter {self.params[b.param].name} "
                f"(block {b.id}) from a pserver, not written: its update diverged (lower the "
                "learning rate, train in a wider dtype, or check the data), or the shard's "
                "store is bad"
            )

    def _dense_runs(
        self, blocks: Sequence[Block], frame: np.ndarray
    ) -> Iterator[tuple[list[Block], np.ndarray]]:
        """A dense reply's ``frame`` (bytes) cut into runs of consecutive blocks of one dtype."""
        at = 0
        for _, group in itertools.groupby(blocks, key=self._dtype):
            run = list(group)
            n = sum(b.nbytes for b in run)
            yield run, frame[at : at + n]
            at += n

    def _dtype(self, b: Block) -> np.dtype:
        """The dtype of block ``b``'s parameter (as its shard keeps it)."""
        return np.dtype(self._specs[b.param].dtype)

    def _put(self, blocks: Sequence[Block], arrays: Sequence, reply, versions: list) -> set[int]:
        """Write a reply :meth:`_check_reply` passed; the indices of the parameters written."""
        if "rows" in reply:
            for k, b in enumerate(blocks):
                self._host_rows(b.param)[arrays[2 * k]] = arrays[2 * k + 1]
        else:
            self._write_values(blocks, arrays[0])
        for b, v in zip(blocks, versions):
            self._versions[b.id] = v
        return {b.param for b in blocks}

    def _unfit(self, blocks: Sequence[Block], problem: WireError) -> SyncError:
        """The error for a reply that does not fit ``blocks``, naming the shard they are on
        (one reply's blocks are all one shard's) where this writer is a client's, with its
        shards (``ShardChannel._malformed``)."""
        layout, malformed = getattr(self, "layout", None), getattr(self, "_malformed", None)
        if layout is None or malformed is None or not blocks:
            return SyncError(f"rank {self.rank}: malformed reply from a pserver: {problem}")
        return malformed(layout.shard_of[blocks[0].id], problem)

    def _from_shard(self, blocks: Sequence[Block]) -> str:
        """`` (pserver shard N (HOST:PORT))``, the shard ``blocks`` are on, where this writer
        is a client's (with its shards); else nothing."""
        layout, named = getattr(self, "layout", None), getattr(self, "_named", None)
        if layout is None or named is None or not blocks:
            return ""
        return f" (pserver shard {named([layout.shard_of[blocks[0].id]])})"

    def _check_rows(
        self, blocks: Sequence[Block], arrays: Sequence[np.ndarray], counts: Sequence[int]
    ) -> None:
        """WireError unless a sparse reply is ``[ids, values]`` per block: ids strictly
        increasing int64 inside the block, values ``(len(ids), row_len)`` of the parameter's
        dtype; all checked before any row is written (a bad id could wrap or overrun)."""
        if len(arrays) != 2 * len(blocks) or len(counts) != len(blocks):
            raise WireError(
                f"{len(arrays)} arrays and {len(counts)} row counts for {len(blocks)} blocks "
                "(want one count and [ids, values] per block)"
            )
        for k, b in enumerate(blocks):
            ids, values, spec = arrays[2 * k], arrays[2 * k + 1], self._specs[b.param]
            check_row_ids(ids, counts[k], b.start, b.stop, f"rows of block {b.id}")
            check_rows(values, spec, counts[k], f"values of block {b.id}")

    def _write_values(self, blocks: Sequence[Block], values: np.ndarray) -> None:
        """Put each block's slice of ``values`` (bytes, back to back in ``blocks`` order) into
        its parameter: one frame per reply, no per-block objects.

        A dense host parameter whose blocks all come in this frame, one after the other, ADOPTS
        its slice of the frame: ``param.value`` becomes a view of it (see :meth:`_adopt`), so
        its new values cost no copy. Any other block is copied into its parameter.
        """
        at, k = 0, 0
        address = address_of(values)  # once per reply
        while k < len(blocks):
            b = blocks[k]
            whole = self._param_blocks[b.param]
            n = self._specs[b.param].rows * self._specs[b.param].row_bytes
            frame = values[at : at + n]
            if blocks[k : k + len(whole)] == whole and self._adopt(b.param, frame, address + at):
                at, k = at + n, k + len(whole)
                continue
            host = self._host_rows(b.param)
            dst = host[b.start : b.stop]
            dst[...] = values[at : at + b.nbytes].view(host.dtype).reshape(dst.shape)
            at, k = at + b.nbytes, k + 1

    def _adopt(self, i: int, frame: np.ndarray, address: int) -> bool:
        """Make ``frame`` (all of parameter ``i``'s bytes, from a reply, starting at memory
        ``address``) its value; False (and nothing done) where it cannot be: a device
        parameter, or a frame that is read-only or not aligned for the dtype.

        This is the one place where the worker replaces ``param.value``: the array object
        changes every step, its contents are the new values. Layers and checkpoints read
        ``param.value`` through the parameter each time, never keep the array.
        """
        p = self.params[i]
        dtype = p.value.dtype
        if not frame.flags.writeable or address % dtype.itemsize or is_gpu_array(p.value):
            return False
        p.value = frame.view(dtype).reshape(p.value.shape)
        return True

    @contextlib.contextmanager
    def _to_device_after(self, written: set[int]) -> Iterator[None]:
        """Move the parameters the block puts in ``written`` to the device once it ends, also
        by an error (a reply refused, a shard lost), so the device holds what the host copies
        do. A move that fails then (the device out of memory) is noted on that error, which
        stays the one raised: it names the shard at fault."""
        try:
            yield
        except BaseException as error:
            try:
                self._values_to_device(written)
            except Exception as move:
                add_note(error, f"moving the values written to the device failed too: {move!r}")
            raise
        self._values_to_device(written)

    def _values_to_device(self, written: set[int]) -> None:
        """Host copies of these parameters were written; move them to the device (no-op on
        CPU). Only those: the others may have no host copy yet."""
        for i in sorted(written):
            p = self.params[i]
            if is_gpu_array(p.value):
                copy_into(p.value, self._host[p.name])


def _block_slices(blocks: Sequence[Block], values: np.ndarray) -> Iterator[np.ndarray]:
    """Each block's bytes of a dense reply's ``values`` frame (back to back, in order)."""
    at = 0
    for b in blocks:
        yield values[at : at + b.nbytes]
        at += b.nbytes


def _check_rows_as_asked(
    blocks: Sequence[Block], got: Sequence[np.ndarray], counts: Sequence[int], asked: Any
) -> None:
    """WireError unless each block's row ids ``got`` (``counts`` of them, checked) are those
    ``asked`` (a list per block), or list the rows pushed (:class:`RowsPushed`)."""
    if not isinstance(asked, RowsPushed):
        _check_rows_asked(blocks, got, counts, asked, "asked for")
    elif not asked.union:
        _check_rows_asked(blocks, got, counts, asked.ids, "pushed")
    else:
        _check_rows_listed(blocks, got, asked.ids)


def _check_rows_asked(
    blocks: Sequence[Block],
    got: Sequence[np.ndarray],
    counts: Sequence[int],
    asked: Sequence[np.ndarray],
    how: str,
) -> None:
    """WireError unless each block's row ids ``got`` (``counts`` of them, checked) are those
    ``asked`` (``how``: "asked for", "pushed"): the counts, then all the ids in one vector
    compare, not one per block (a big table's prefetch asks for hundreds of blocks); the block
    that differs is looked for only then, for the message."""
    if len(asked) != len(blocks):  # zip would leave the blocks past them unchecked
        raise WireError(f"row ids {how} {len(asked)} of the {len(blocks)} blocks")
    if list(counts) == [len(a) for a in asked] and (
        not blocks or np.array_equal(np.concatenate(got), np.concatenate(asked))
    ):
        return
    # equal lengths, and the counts or the ids differ: so do one block's ids
    b, wanted = next((b, a) for b, g, a in zip(blocks, got, asked) if not np.array_equal(g, a))
    raise WireError(f"rows of block {b.id}: not the {len(wanted)} {how}")


def _check_rows_listed(
    blocks: Sequence[Block], got: Sequence[np.ndarray], pushed: Sequence[np.ndarray]
) -> None:
    """WireError unless each block's row ids ``got`` (checked: increasing, inside the block)
    hold those ``pushed``: a row left out would keep its value of before the update. All the
    blocks at once (ascending, so their ids are too), the block at fault looked for after."""
    if not blocks:
        return
    missing = np.setdiff1d(np.concatenate(pushed), np.concatenate(got), assume_unique=True)
    if len(missing):
        row = int(missing[0])
        b = next((b for b in blocks if b.start <= row < b.stop), None)
        if b is None:  # no reply can hold it: named as such, not a bare StopIteration
            raise WireError(f"row {row} was pushed, outside blocks {[b.id for b in blocks]}")
        raise WireError(
            f"rows of block {b.id}: row {row} was pushed, the reply leaves it out "
            f"({len(missing)} pushed rows missing)"
        )
