"""Sparse tables on the client: which rows a step read, and pulling just those.

A parameter marked ``sparse_rows`` (an embedding table) stays whole on the shards; a worker
pulls the rows the next forward reads (:meth:`SparseRows.prefetch`, called by the Trainer) and
pushes, after backward, the rows the step read. One rule says which:

- a step is open from :meth:`start_step` until its ``finish_step`` or ``abandon_step`` ends it
  (``_taken`` is set: a ``finish_step`` that raised ends it too);
- rows prefetched while a step is open are that step's, and all go back;
- rows prefetched while none is open (an evaluation's, the next batch's before its
  ``start_step``, any after a ``finish_step`` that raised) are marked in a mask of the table,
  which the next ``start_step`` takes: of those, the rows the step's backward wrote go back (so
  an evaluation's rows are pulled, not pushed): the rows its layers noted
  (:mod:`distconv.layers.written_rows`), a zero gradient among them, where every write of the
  table was noted, else the rows holding a nonzero gradient, read from the whole table;
- a gradient in any other row is refused before any of it is sent: the forward read rows that
  may be behind the shards (a sync worker's replies carry only its own rows, an async one's
  lag other workers'), and the step would train wrong.

:class:`SparseRows` is a mixin of :class:`~distconv.sync.ps.client.PServerSync`: it uses the
client's parameters, specs, block targets and reply writers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distconv.backend import get_array_module, to_host
from distconv.layers.written_rows import (  # noqa: F401  (CHECK_ROWS_VARIABLE: tests import it here)
    CHECK_ROWS_VARIABLE,
    close_rows,
    not_noted,
    open_rows,
    rows_holding,
    take_rows,
    unnoted_rows,
)
from distconv.messages import env_switch
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.ps.blocks import Block, rows_bytes, rows_view
from distconv.sync.ps.wire import MAX_HEADER_BYTES


class SparseRows:
    """Which rows of each sparse parameter the open step may push (the module's rule)."""

    _taken: set[int] | None  # the step's gradients taken, None where no step is open (closing)

    def _init_sparse_rows(self) -> None:
        self._row_ids: dict[str, np.ndarray] = {}  # name -> sorted ids prefetched in the step
        # name -> a mask of the table's rows prefetched while no step was open, since the last
        # start_step (a mask, not ids: an evaluation's many batches cost no sort each)
        self._waiting: dict[str, np.ndarray] = {}
        self._before: dict[str, np.ndarray] = {}  # the masks the open step took at its start
        self._pushed: dict[int, np.ndarray] = {}  # parameter index -> the rows pushed
        # the parameters whose notes of written rows this sync's open step opened: let go of at
        # its end, and at a setup again (which changes self.params) as at close, not another's
        for p in getattr(self, "_noting", ()):  # none yet when the sync is made
            close_rows(p)
        self._noting: list[Parameter] = []

    def _zero_gradients(self, done: set[int] = frozenset()) -> None:
        """Clear every gradient for the next step but those in ``done`` (already cleared)."""
        for i in range(len(self.params)):
            if i not in done:
                self._zero_gradient(i)
        self._pushed = {}

    def _zero_gradient(self, i: int) -> None:
        """Clear parameter ``i``'s gradient: a sparse table's only in the rows it pushed, the
        only rows that can hold one (:meth:`_touched` refuses any other), not the table."""
        p = self.params[i]
        rows = self._pushed.get(i)
        if p.grad is None:  # a static parameter: no gradient to clear
            return
        if rows is None:
            p.grad[...] = 0
        else:
            xp = get_array_module(p.grad)
            rows_view(p.grad, self._specs[i])[xp.asarray(rows)] = 0

    def abandon_step(self) -> None:
        """A step cut short (see the contract): its own rows are forgotten; rows prefetched
        while no step was open (after a ``finish_step`` that raised) wait for the next one."""
        self._record_rows(False)
        super().abandon_step()  # type: ignore[misc]  # the step's order ends too (StepOrder)

    def _record_rows(self, starting: bool) -> None:
        """A step starts (it takes the rows prefetched while none was open, which no later
        step gets) or ends (its own rows are let go of; ending early changes nothing, as a
        step that is not open records nothing)."""
        self._row_ids, self._before = {}, {}
        if starting:
            self._before, self._waiting = self._waiting, {}
        for p in self._noting:  # let go only of notes this sync opened, not another's
            close_rows(p)
        # the rows its layers write, which spare reading the table: kept in a step only
        self._noting = [p for p in self.params if p.sparse_rows] if starting else []
        for p in self._noting:
            open_rows(p)

    def _step_open(self) -> bool:
        """Between :meth:`start_step` and the end of its ``finish_step`` or ``abandon_step``
        (one that raised included): the base's record of the step's gradients."""
        return self._taken is not None

    def _touched(self, i: int, grad: Any) -> np.ndarray:
        """The rows of a sparse parameter this step read: those prefetched in it, and of those
        it took at :meth:`start_step` (a first pass's, an evaluation's), the ones the step
        wrote (:func:`rows_with_gradient`; none: a rank's empty share).

        Raises:
            SyncError: before anything of it is sent, where the gradient has rows but the
                parameter was prefetched neither in the step nor while none was open before it
                (:func:`not_prefetched`), or where a row has a gradient but was not
                prefetched: a layer read rows its ``rows_read`` did not report, and its
                update would be lost; under :data:`CHECK_ROWS_VARIABLE`, a row with a
                gradient its layers did not note (:func:`rows_with_gradient`).
        """
        name = self.params[i].name
        with_grad, noted = noted_or_scanned(self.params[i], grad, self.rank)
        rows, before = self._row_ids.get(name), self._before.get(name)
        if rows is None and before is None and len(with_grad):
            raise SyncError(not_prefetched(self.rank, name, len(with_grad)))
        missed = with_grad if rows is None else np.setdiff1d(with_grad, rows, True)
        if before is not None:  # a first pass's before the step, the next ones' in it
            missed = missed[~before[missed]]
        if len(missed):
            # noted rows holding only zeros: the notes are wrong, not rows_read (a mask, or
            # more ids than the backward added into); one row with a gradient: rows_read
            empty = noted and not bool(grad[get_array_module(grad).asarray(missed)].any())
            raise SyncError(not_read(self.rank, name, missed, before is not None, empty))
        # the step's own rows all go back; of those it took (an evaluation's too), the ones
        # with a gradient (none missed): those the step read
        if rows is None:
            rows = with_grad  # all taken at start_step, or none: an empty share
        elif before is not None:
            rows = np.union1d(rows, with_grad)
        self._pushed[i] = rows
        return rows

    def prefetch(self, row_ids_by_param: Mapping[str, Any]) -> None:
        """Pull the rows the next batch needs of each sparse parameter, before its forward.

        Args:
            row_ids_by_param: sparse parameter name -> the row ids (any order, repeats allowed)
                the next forward pass reads. The rows prefetched in a step (every pass's, when
                gradients accumulate) are the rows pushed after its backward.

        Raises:
            ValueError: a name that is not a sparse parameter, or an id out of range.
            SyncError: a block's row ids over a shard's frame bound, or in a step a shard's
                rows over its cap (they go back in one push); nothing is recorded. Outside a
                step (an evaluation) the rows are pulled in as many requests as the caps need.
        """
        wanted = self._checked_rows(row_ids_by_param)  # all names first: nothing half-recorded
        in_step = self._step_open()
        asks, plan = [], []
        for i, rows in wanted.items():
            # a step's rows go back in one push per shard, so they must fit one message now;
            # an evaluation's (outside a step) are only read, in as many pulls as the caps need
            whole = in_step
            for shard, blocks, ids_per_block in self._rows_by_shard(i, rows, "prefetch", whole):
                head = {
                    "op": "pull",
                    "blocks": [b.id for b in blocks],
                    "rows": [len(r) for r in ids_per_block],
                }
                asks.append((shard, head, ids_per_block))
                plan.append(blocks)
        if in_step:  # the step's rows, as asked (the order these calls always had)
            self._note(wanted, in_step)
        replies = self._ask_all(asks, "prefetch", stoppable=True)
        self._write_all(
            [(blocks, arrays, h) for blocks, (h, arrays) in zip(plan, replies)],
            rows_asked=[ids for _, _, ids in asks],
        )
        if not in_step:  # current once written: the next step may push those with a gradient
            self._note(wanted, in_step)

    def _note(self, wanted: Mapping[int, np.ndarray], in_step: bool) -> None:
        """Record the rows ``wanted`` (parameter index -> sorted ids): in a step, beside its
        rows to push; outside one, in the mask the next :meth:`start_step` takes."""
        for i, rows in wanted.items():
            name = self.params[i].name
            if in_step:
                seen = self._row_ids.get(name)
                self._row_ids[name] = rows if seen is None else np.union1d(seen, rows)
                continue
            if name not in self._waiting:
                self._waiting[name] = np.zeros(self._specs[i].rows, dtype=bool)
            self._waiting[name][rows] = True

    def _push_rows(self, i: int, grad: Any) -> None:
        """Push the rows of sparse parameter ``i`` this step read, one message per shard,
        every one checked before the first leaves: a shard refusing its part while another
        applied its own would leave the table half updated. ``grad`` is the gradient as its
        ``(rows, row_len)`` matrix, on its device: only the rows pushed reach the host."""
        rows = self._touched(i, grad)
        plan = self._rows_by_shard(i, rows, "push", whole=True)
        values = to_host(grad[get_array_module(grad).asarray(rows)])  # the pushed rows alone
        for shard, blocks, ids in plan:
            arrays = [a for r in ids for a in (r, values[np.searchsorted(rows, r)])]
            self._push_message(shard, [i], blocks, arrays, rows=[len(r) for r in ids])

    def _rows_by_shard(
        self, i: int, rows: np.ndarray, what: str, whole: bool
    ) -> list[tuple[int, list[Block], list[np.ndarray]]]:
        """``(shard, blocks of parameter i there, their ids among rows)``: one entry per shard
        where ``whole`` (checked against its cap by :meth:`_check_ids`: a pull's reply holds the
        same bytes as a push), else as many as the shard's cap needs, of consecutive blocks."""
        plan = []
        for shard, blocks in self._targets[i]:
            ids = [rows_in(rows, b) for b in blocks]
            self._check_ids(shard, blocks, ids, what if whole else None)
            if whole:
                plan.append((shard, blocks, ids))
                continue
            sizes = [rows_bytes(len(r), self._specs[i].row_bytes) for r in ids]
            for run in self._runs(shard, list(zip(blocks, ids)), sizes):
                plan.append((shard, [b for b, _ in run], [r for _, r in run]))
        return plan

    def _check_ids(
        self, shard: int, blocks: Sequence[Block], ids: Sequence[np.ndarray], what: str | None
    ) -> None:
        """SyncError unless each block's row ids, one frame of 8 bytes a row, fit the shard's
        frame bound, and (unless ``what`` is None) the ids and rows together, one ``what``
        message, its ``max_message_bytes``.

        The start-up check holds each block to the frame bound, but a row of fewer than 8
        bytes (a float32 table one column wide) makes the ids of half its block's rows larger
        than the block, and ZeroMQ would drop that frame with the connection: a silent timeout.
        A push is never cut (the shard takes a parameter's blocks on it in one
        push), and the rows of several accumulated passes may pass a cap each pass kept."""
        bound = max(self._frame_bytes[shard], MAX_HEADER_BYTES)  # the shard's MAXMSGSIZE
        spec = self._specs[blocks[0].param]  # a target holds at least one block
        name = spec.name
        for b, rows in zip(blocks, ids):
            if rows.nbytes > bound:
                raise SyncError(
                    f"rank {self.rank}: the {len(rows)} row ids of block {b.id} of "
                    f"{name} make a frame of {rows.nbytes} bytes, more "
                    f"than the {bound} pserver {self.endpoints[shard]} takes: use a smaller "
                    "block size or a larger --max-frame-bytes"
                )
        count = sum(len(r) for r in ids)
        size = rows_bytes(count, spec.row_bytes)
        if what is not None and size > self._caps[shard]:
            raise SyncError(
                f"rank {self.rank}: a {what} of the {count} rows of {name} (ids and values) "
                f"holds {size} bytes for pserver {self.endpoints[shard]}, more than its "
                f"--max-message-bytes {self._caps[shard]}: read fewer rows a step (a smaller "
                "batch, fewer accumulated passes), or use more shards or a larger cap"
            )

    def _checked_rows(self, row_ids_by_param: Mapping[str, Any]) -> dict[int, np.ndarray]:
        """Parameter index -> sorted unique row ids, every name and id checked."""
        wanted = {}
        for name, ids in row_ids_by_param.items():
            if name not in self._by_name:
                raise ValueError(f"no parameter {name!r} in this job")
            i = self._by_name[name]
            spec = self._specs[i]
            if not spec.sparse:
                raise ValueError(f"prefetch: {name} is not marked sparse_rows")
            rows = np.unique(np.asarray(to_host(ids), dtype=np.int64).ravel())
            if len(rows) and (rows[0] < 0 or rows[-1] >= spec.rows):
                raise ValueError(
                    f"prefetch: row ids of {name} span [{rows[0]}, {rows[-1]}], outside its "
                    f"rows 0..{spec.rows - 1}"
                )
            wanted[i] = rows
        return wanted


def rows_with_gradient(param: Parameter, grad: Any, rank: int = 0) -> np.ndarray:
    """The sorted rows (int64, host) of ``param``'s gradient ``grad`` (its ``(rows, row_len)``
    matrix, on its device) that this step wrote: those its layers said they wrote
    (:mod:`distconv.layers.written_rows`), where they said so of every write; else those with
    a nonzero, read from the whole table on its device (a full read each step: see
    docs/benchmarks.md, "A sparse push's rows").

    Raises:
        SyncError: under :data:`CHECK_ROWS_VARIABLE`, a row with a gradient that the layers,
            having noted their writes, left out (:func:`not_noted`; ``rank`` names this one).
    """
    return noted_or_scanned(param, grad, rank)[0]


def noted_or_scanned(param: Parameter, grad: Any, rank: int = 0) -> tuple[np.ndarray, bool]:
    """:func:`rows_with_gradient`, and whether they are the rows noted (else scanned)."""
    noted = take_rows(param)
    if noted is not None and not env_switch(CHECK_ROWS_VARIABLE):
        return noted, True
    if noted is None:
        return rows_holding(grad), False
    if len(left_out := unnoted_rows(grad, noted)):
        raise SyncError(f"rank {rank}: {not_noted(param.name, left_out)}")
    return noted, True


def not_prefetched(rank: int, name: str, rows: int) -> str:
    """Why a step's gradient of sparse table ``name`` in ``rows`` rows is refused without a
    prefetch of it in the step (or while none was open before it), and the way out."""
    return (
        f"rank {rank}: {name}: a gradient in {rows} {'row' if rows == 1 else 'rows'}, but no "
        f"sync.prefetch of {name} in this step: a parameter server moves only the rows "
        "prefetched in a step, so this forward may have read rows other workers moved, and "
        "the step would train wrong; call sync.prefetch(network.rows_needed(batch)) after "
        "sync.start_step, before each forward, as the Trainer does"
    )


def not_read(
    rank: int, name: str, missed: np.ndarray, before: bool, noted_empty: bool = False
) -> str:
    """Why a gradient of sparse table ``name`` in rows ``missed``, not prefetched, is refused:
    the rows were prefetched ``before`` the step (another batch's), or in it (a layer reads
    rows its ``rows_read`` misses); ``noted_empty``: the rows were noted as written but hold
    no gradient (a layer noted rows it did not add into: a mask, or more ids)."""
    ids, count = missed[:8].tolist(), len(missed)
    if noted_empty:
        return (
            f"rank {rank}: {name}: rows {ids} noted as written (note_rows) hold no gradient and "
            f"were not prefetched {'before or in this step' if before else 'this step'} "
            f"({count} in all): a layer notes rows its backward does not add into; note only "
            "the rows it adds into (the ids themselves, np.flatnonzero(mask) for a mask), or "
            "report them in rows_read"
        )
    if before:
        return (
            f"rank {rank}: {name}: rows {ids} have gradients but were prefetched neither in "
            f"this step nor since the step before ({count} in all): the prefetch before "
            "sync.start_step was of another batch; prefetch the rows this step's forward reads"
        )
    return (
        f"rank {rank}: {name}: rows {ids} have gradients but were not prefetched this step "
        f"({count} in all); a layer reads rows its rows_read misses"
    )


def rows_in(rows: np.ndarray, block: Block) -> np.ndarray:
    """The sorted ``rows`` that fall in ``block``."""
    lo, hi = np.searchsorted(rows, [block.start, block.stop])
    return rows[lo:hi]
