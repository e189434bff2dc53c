"""What a shard holds (blocks, their optimizer state, held requests, counters) and how an
update changes it: the sync sum in rank order, sparse rows (the async staleness rule is
:mod:`.async_updates`')."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distconv.backend import all_finite
from distconv.messages import named
from distconv.optim import mean_scale
from distconv.sync.ps.blocks import ParamSpec
from distconv.sync.ps.job_hello import REFUSED_JOB
from distconv.sync.ps.sums import over_cap, reply_rows, sum_culprit, sum_in_rank_order
from distconv.sync.ps.wire import (
    DTYPES,
    MAX_ARRAY_BYTES,
    VALUE_DTYPES,
    WireError,
    check_rows,
    is_shape,
    short,
)
from distconv.sync.rate_agreement import first_other_rate, rates_differ

log = logging.getLogger("distconv.pserver")
#: the clock of ``update_seconds`` (a name of its own, so a test can drive it)
_clock = time.perf_counter


@dataclass
class _Block:
    param: int
    start: int
    stop: int
    value: np.ndarray
    state: dict[str, np.ndarray]
    version: int = 0


@dataclass
class _Waiting:
    """Requests held until every worker has sent its part (a sync step or a collective)."""

    what: str
    since: float
    #: rank -> (peer identity, request header, what the op keeps: a push's ``(_Push, parts)``)
    by_rank: dict[int, tuple[bytes, dict[str, Any], Any]] = field(default_factory=dict)
    #: rank -> the shard's count of requests when its part came (see distconv.sync.ps.stuck)
    arrived: dict[int, int] = field(default_factory=dict)


@dataclass
class _Push:
    """A sync push held until every parameter it carries is updated; then one reply."""

    ident: bytes
    header: dict[str, Any]
    left: int  # parameters still waiting for the other workers' pushes
    #: a sparse push's rows its reply carries, once updated (:func:`.sums.reply_rows`)
    touched: list[np.ndarray | None] | None = None


@dataclass
class Stats:
    """What the shard reports on a ``stats`` request and in its log."""

    pushes: int = 0
    push_messages: int = 0
    updates: int = 0
    #: async parameters dropped as too stale: one per parameter of a push, not one per push
    drops: int = 0
    #: async push messages of which at least one parameter was applied
    push_messages_applied: int = 0
    #: async push messages of which every parameter was dropped as too stale
    push_messages_dropped: int = 0
    #: async updates applied, by staleness: entry s counts those s updates stale (sized by
    #: :func:`~distconv.sync.ps.async_updates.staleness_counts`; none in sync mode)
    updates_by_staleness: list[int] = field(default_factory=list)
    errors: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    update_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The counters by name: plain ints, floats and lists of ints (msgpack and JSON take
        them), copied, so that later counts leave what was returned as it is."""
        return {k: list(v) if isinstance(v, list) else v for k, v in self.__dict__.items()}


class _Refused(Exception):
    """A well-formed request the shard cannot serve (not seeded, job failed, NaN gradient);
    ``fields`` go into the error reply beside its message (a failed job's ``failed_ranks``)."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.fields = fields


def _param_spec(entry: Any) -> ParamSpec:
    ok = (
        type(entry) is list
        and len(entry) == 4
        and type(entry[0]) is str
        and is_shape(entry[1])
        and type(entry[2]) is str and entry[2] in DTYPES
        and type(entry[3]) is bool
    )  # fmt: skip
    if not ok:
        raise WireError(f"seed: parameter entry {short(entry)} is not [name, shape, dtype, sparse]")
    if entry[2] not in VALUE_DTYPES:  # an int64 one failed every optimizer at the first push
        raise WireError(f"seed: parameter {short(entry[0])} is {entry[2]}, not float32 or float64")
    if entry[3] and not entry[1]:
        raise WireError(
            f"seed: sparse parameter {short(entry[0])} has shape []: a table needs rows"
        )
    spanned = math.prod(n for n in entry[1] if n) * VALUE_DTYPES[entry[2]].itemsize
    if spanned > MAX_ARRAY_BYTES:
        raise WireError(f"seed: parameter shape {short(entry[1])} spans {spanned} bytes")
    return ParamSpec(entry[0], tuple(entry[1]), entry[2], entry[3])


def _table_entry(entry: Any, params: Sequence[ParamSpec]) -> tuple[int, int, int, int]:
    ok = type(entry) is list and len(entry) == 4 and all(type(n) is int for n in entry)
    if not ok or not 0 <= entry[1] < len(params):
        raise WireError(f"seed: block entry {short(entry)} is not [id, param, start, stop]")
    bid, p, start, stop = entry
    if not 0 <= start < stop <= params[p].rows:
        raise WireError(f"seed: block {bid} rows {start}:{stop} outside 0:{params[p].rows}")
    return bid, p, start, stop


def dense_gradients(
    blocks: Mapping[int, _Block], params: Sequence[ParamSpec], ids: Sequence[int], arrays: list
) -> list[np.ndarray]:
    """Per block of ``ids``, its gradient from a dense push's frames, in order: each frame one
    block (its dtype, ``(rows, row_len)``), or a ``uint8`` gradient run of one or more whole
    consecutive blocks back to back (protocol 4), split here into views of it.

    Raises:
        WireError: the frames cover fewer blocks than the push's or go past them, a run ends
            inside a block, or a one-block frame has the wrong dtype or shape.
    """
    grads: list[np.ndarray] = []
    for k, a in enumerate(arrays):
        if len(grads) == len(ids):
            raise WireError(f"push: array {k} goes past the push's {len(ids)} blocks")
        if a.dtype != DTYPES["uint8"]:
            b = blocks[ids[len(grads)]]
            check_rows(a, params[b.param], b.stop - b.start, f"block {ids[len(grads)]}")
            grads.append(a)
            continue
        if a.ndim != 1 or not a.nbytes:
            raise WireError(f"push: a gradient run must be 1-D uint8 bytes, got shape {a.shape}")
        at = 0
        while at < a.nbytes:
            if len(grads) == len(ids):
                raise WireError(
                    f"push: a gradient run of {a.nbytes} bytes goes past the push's blocks"
                )
            b = blocks[ids[len(grads)]]
            spec = params[b.param]
            n = (b.stop - b.start) * spec.row_bytes
            if at + n > a.nbytes:
                raise WireError(
                    f"push: a gradient run of {a.nbytes} bytes ends inside block {ids[len(grads)]}"
                )
            grad = a[at : at + n].view(VALUE_DTYPES[spec.dtype])
            grads.append(grad.reshape(b.stop - b.start, spec.row_len))
            at += n
    if len(grads) != len(ids):
        raise WireError(
            f"push: {len(arrays)} arrays for {len(ids)} blocks cover only the first {len(grads)}"
        )
    return grads


class BlockUpdates:
    """The optimizer side of :class:`~distconv.sync.ps.server.Shard`: collect a sync step's
    pushes, apply them to the blocks (an async push: :class:`.async_updates.AsyncUpdates`),
    build the reply's values."""

    def _collect_push(
        self, ident: bytes, header: dict[str, Any], params: list, parts: list
    ) -> None:
        """Hold each parameter's part of a sync push until every worker has sent it, then
        update the parameters this push completes (:meth:`_apply_complete`).

        Every parameter is checked before any is held, so a refused push leaves nothing
        behind; every parameter the push completes is summed and checked for NaN/Inf before
        any of them is updated, so a non-finite one fails the job with none of them updated.
        A parameter of the same step that another push completed earlier (workers group their
        parameters differently) may be updated already: its sum was finite, and the failed
        job resumes from the last checkpoint.
        """
        step, rank, sparse = header["step"], header["rank"], "rows" in header
        for p in params:
            if step <= self.completed.get(p, -1):  # named as the refusals below: which rank
                what = f"rank {rank} pushed {self.params[p].name} for step {step}"
                raise WireError(f"stale push: {what}, done already")
            waiting = self.waiting.get(f"push:{p}")
            first = next(iter(waiting.by_rank.values()), None) if waiting else None
            if first is not None and first[1]["step"] != step:
                what = f"rank {rank} pushed {self.params[p].name} for step {step}"
                raise WireError(f"{what}, shard is collecting step {first[1]['step']}")
            if first is not None and ("rows" in first[1]) != sparse:
                raise WireError(f"rank {rank} pushed {self.params[p].name} dense and sparse mixed")
            if waiting is not None and rank in waiting.by_rank:
                raise WireError(f"rank {rank} pushed {self.params[p].name} twice in step {step}")
        push = _Push(ident, header, len(params))
        complete, at = [], 0
        for p in params:
            n = len(self.by_param[p])
            if self._hold(p, step, rank, push, parts[at : at + n]):
                complete.append(p)
            at += n
        if complete:
            self._apply_complete(complete, step)

    def _hold(self, p: int, step: int, rank: int, push: _Push, parts: list) -> bool:
        """Hold ``rank``'s part of parameter ``p``; True once every worker's is held."""
        waiting = self.waiting.setdefault(f"push:{p}", _Waiting(f"step {step}", time.monotonic()))
        waiting.by_rank[rank] = (push.ident, push.header, (push, parts))
        waiting.arrived[rank] = self.requests
        return len(waiting.by_rank) == self.config.workers

    def _apply_complete(self, complete: list[int], step: int) -> None:
        """Sum the held parts of the parameters in ``complete`` in rank order, check every
        block's sum, and only then update them (:meth:`_apply_sync`); a sum that is not
        finite fails the job (:func:`~distconv.sync.ps.sums.sum_culprit` names the cause) with
        none of them updated.

        The sums' time counts in ``update_seconds``, the check's does not (it is transport
        time: the benchmark reports the optimizer apart). An overflow in the sums or in the
        check is reported by the check, not warned about; the optimizer's warnings stay on.
        """
        refusal = self._rates_differ(complete, step)
        if refusal is not None:  # the ranks' schedules differ: the user's job, none updated
            self._fail(refusal, **REFUSED_JOB)
            return
        doing, p = "sum", complete[0]  # what failed, and on which parameter, if anything does
        try:
            start = _clock()
            with np.errstate(over="ignore", invalid="ignore"):
                sums = {}
                for p in complete:
                    sums[p] = self._sums(p)
                summed = _clock() - start
                doing, error = "NaN/Inf check", None
                for p in complete:  # and a sparse reply of every rank's rows within the cap
                    error = error or self._not_finite(p, step, *sums[p])
                    error = error or over_cap(self.params[p], step, sums[p][2], self.config)
            if error:
                self._fail(error)
                return
            self.stats.update_seconds += summed
            for p in complete:  # from here some blocks may be updated: the job cannot go on
                doing = "update"
                self._apply_sync(p, step, *sums[p][1:])
                doing = "reply"
                self._answer(p, sums[p][2])
        except Exception as exc:  # still held: the failure answers every rank waiting for it
            log.exception("shard %d: sync %s of parameter %d failed", self.index, doing, p)
            self._fail(
                f"{doing} of parameter {self.params[p].name} at step {step} failed on shard "
                f"{self.index}: {named(exc)}"
            )

    def _rates_differ(self, complete: list[int], step: int) -> str | None:
        """None where every rank's push of each parameter in ``complete`` carries the same
        ``lr``, bit for bit, else the refusal naming the step, two ranks and their rates
        (:mod:`~distconv.sync.rate_agreement`): one sum applied at one rank's rate trained the
        others at a rate their schedule did not set, without a word."""
        for p in complete:
            held = self.waiting[f"push:{p}"].by_rank
            rates = {rank: float(header["lr"]) for rank, (_, header, _) in held.items()}
            first = min(rates)
            other = first_other_rate(rates, first)
            if other is not None:
                said = rates_differ(step, (first, rates[first]), (other, rates[other]))
                return f"shard {self.index}, parameter {self.params[p].name}: sync {said}"
        return None

    def _sums(self, p: int) -> tuple[list[int], list, list]:
        """Parameter ``p``'s held ranks in order, their ``(push, parts)``, and per block the
        ranks' ``(row ids or None, gradient sum)``."""
        waiting = self.waiting[f"push:{p}"]
        ranks = sorted(waiting.by_rank)
        held = [waiting.by_rank[r][2] for r in ranks]
        blocks = range(len(self.by_param[p]))
        return ranks, held, [sum_in_rank_order([parts[i] for _, parts in held]) for i in blocks]

    def _not_finite(
        self, p: int, step: int, ranks: list[int], held: list, sums: list
    ) -> str | None:
        """None if every block sum of parameter ``p`` at sync step ``step`` is finite, else the
        error for the first that is not (see :func:`~distconv.sync.ps.sums.sum_culprit`)."""
        for i, (_, grad) in enumerate(sums):
            if not all_finite(grad):
                parts = [rank_parts[i][1] for _, rank_parts in held]
                return sum_culprit(self.params[p].name, ranks, parts, grad, step)
        return None

    def _apply_sync(self, p: int, step: int, held: list, sums: list) -> None:
        """Update parameter ``p``'s blocks with the ranks' checked ``sums`` (see :meth:`_sums`)
        from ``held``, its ranks' ``(push, parts)``."""
        scale = mean_scale(sum(push.header["count"] for push, _ in held))
        # every rank's, bit for bit (_rates_differ refused the step before its sums otherwise)
        self.optimizer.lr = float(held[0][0].header["lr"])
        start = _clock()
        for bid, (rows, grad) in zip(self.by_param[p], sums):
            self._update(self.blocks[bid], grad, scale, rows)
        self.stats.update_seconds += _clock() - start
        self.stats.updates += 1
        self.completed[p] = step
        self.top_step = max(self.top_step, step)

    def _answer(self, p: int, sums: list) -> None:
        """Answer each push held for parameter ``p`` (just updated) whose last parameter this
        was; the others stay held under their parameters still incomplete."""
        waiting = self.waiting[f"push:{p}"]
        for rank in sorted(waiting.by_rank):
            push, parts = waiting.by_rank[rank][2]
            if sums[0][0] is not None:  # a sparse push carries this one parameter only
                push.touched = reply_rows(rank, sums, parts)
            push.left -= 1
            if push.left == 0:
                arrays, fields = self._values(push.header["blocks"], push.touched or ())
                self._reply(push.ident, push.header, arrays, **fields)
            # done with here once answered (or held under its other parameters): if a reply
            # fails, the job's failure answers the pushes still held, and only those, once
            del waiting.by_rank[rank]
        del self.waiting[f"push:{p}"]

    def _fits(self, nbytes: int, op: str) -> None:
        """WireError unless a reply of ``nbytes`` array bytes fits ``--max-message-bytes``."""
        if nbytes > self.config.max_message_bytes:
            raise WireError(
                f"{op}: the reply would carry {nbytes} bytes, over the shard's "
                f"max_message_bytes {self.config.max_message_bytes}: ask for fewer blocks"
            )

    def _values(self, ids: Sequence[int], touched: Sequence[np.ndarray | None] = ()):
        """The reply to a push or a pull: the blocks' values as one frame (see
        :mod:`.values`), or their touched rows as [ids, rows] pairs."""
        fields: dict[str, Any] = {"versions": [self.blocks[b].version for b in ids]}
        if not touched or touched[0] is None:
            # a view of the store when the blocks are consecutive: _reply sends a copy
            return [self.store.frame(ids)], fields
        arrays = []
        for bid, rows in zip(ids, touched):
            arrays += [rows, self.blocks[bid].value[rows - self.blocks[bid].start]]
        fields["rows"] = [len(r) for r in touched]
        return arrays, fields

    def _update(
        self, block: _Block, grad: np.ndarray, scale: float, rows: np.ndarray | None = None
    ) -> None:
        """One optimizer step on a block with the gradient ``grad * scale``, or on some of its
        rows (sparse: the others keep their values and state, as if their gradient had not
        existed: "lazy" momentum and Adam)."""
        if rows is None:
            self.optimizer.update(block.value, grad, block.state, grad_scale=scale)
        elif len(rows):
            local = rows - block.start
            value = block.value[local]
            state = {k: s[local] if s.ndim else s for k, s in block.state.items()}
            self.optimizer.update(value, grad, state, grad_scale=scale)
            block.value[local] = value
            for k, s in block.state.items():
                if s.ndim:
                    s[local] = state[k]
        block.version += 1
