"""The requests a shard answers: one ``_op_<name>`` method per wire ``op`` (``gather`` and
``bye`` in :mod:`~distconv.sync.ps.gathers`, ``hello`` and ``seed`` in
:mod:`~distconv.sync.ps.startup`), with the checks that turn a malformed request
into an error reply instead of a crash."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from distconv.messages import named
from distconv.rank_endings import another_id_text
from distconv.sync.ps.blocks import rows_bytes
from distconv.sync.ps.job_hello import REFUSED_JOB
from distconv.sync.ps.other_ids import OtherJobIds
from distconv.sync.ps.request_log import RefusalLog, peer_name, signer_rank
from distconv.sync.ps.startup import STALE_PUSH as STALE_PUSH  # where tests read it
from distconv.sync.ps.startup import StartupHandlers
from distconv.sync.ps.state import _Block, _Refused, dense_gradients
from distconv.sync.ps.wire import (
    PROTOCOL_VERSION,
    WireError,
    check_row_ids,
    check_rows,
    int_list,
    refuse_stray_arrays,
    short,
    unpack_arrays,
    unpack_header,
)

log = logging.getLogger("distconv.pserver")


class RequestHandlers(StartupHandlers, OtherJobIds):
    """The request side of :class:`~distconv.sync.ps.server.Shard`: check a request, dispatch
    it to its ``_op_`` method (``hello`` and ``seed`` in
    :class:`~distconv.sync.ps.startup.StartupHandlers`; a hello of another job's id is
    :class:`~distconv.sync.ps.other_ids.OtherJobIds`')."""

    #: whether a failure no check foresaw has been logged with its traceback yet
    _traced = False
    #: the log of refused requests, bounded per peer and cause (made by the shard)
    refusals: RefusalLog
    _key_rank: dict[bytes, int]

    # -- dispatch -----------------------------------------------------------------------------
    def handle(self, frames: Sequence[Any]) -> None:
        """Check one request and answer it (now, or when its sync step or collective is done)."""
        ident = frames[0].bytes
        self.stats.bytes_in += sum(len(f) for f in frames[1:])
        header: dict[str, Any] = {}
        sender = False  # whether the job, rank and key are checked: whose refusal it is
        try:
            # ZeroMQ hands a ROUTER at least one frame after the identity: frames[1] exists
            header = unpack_header(frames[1].buffer, frames_after=len(frames) - 2)
            self._check_sender(header, frames[1])
            sender = True
            refuse_stray_arrays(header, len(frames) - 2)
            arrays = unpack_arrays(
                header, [f.buffer for f in frames[2:]], self.config.max_message_bytes
            )
            if self.failed and header["op"] not in ("stats", "bye"):
                raise _Refused(self._failed_words(header), **self._failed_reply_fields(header))
            if header["op"] not in ("hello", "bye", "stats"):
                self._check_run(header)
            if header["op"] != "hello":  # a hello says so once accepted (_op_hello)
                self._note_alive(header)
            self.requests += 1
            getattr(self, f"_op_{header['op']}")(ident, header, arrays)
            self._note_link(header, frames[1])  # a hello's once taken (duplicates.py)
            if header["op"] in ("gather", "push", "bye", "abandon"):  # may leave ranks held
                self._check_stuck(header["op"])
                self._check_other_ids()  # a rank of this job claimed by another's alone
        except (WireError, _Refused) as exc:
            self.stats.errors += 1
            self._spoil_seed(header, sender)
            self._heard_refused_hello(getattr(exc, "header", None), frames[1])
            self._log_refusal(frames, exc)
            said = header or {"id": getattr(exc, "rid", -1)}  # a header refused: its id, if read
            self._reply(ident, said, error=str(exc), **getattr(exc, "fields", {}))
        except Exception as exc:  # a request no check foresaw must not take the shard down
            self.stats.errors += 1
            self._spoil_seed(header, sender)
            self._log_unexpected(frames, header, exc)
            self._reply(ident, header, error=f"shard error: {named(exc)}")

    def _spoil_seed(self, header: dict[str, Any], sender: bool) -> None:
        """A refused part of rank 0's seed drops the seed in progress (docs/protocol.md),
        whatever refused it: its arrays (malformed, over the cap), a check of ``_op_seed``, or
        a failure no check foresaw. Not a part of another job, key or rank (``sender``
        unchecked, or :meth:`_op_seed`'s rank check), nor of rank 0's run before, refused as
        such: rank 0's seed of now goes on."""
        if sender and header.get("op") == "seed" and header["rank"] == 0:
            if self._of_current_run(header):
                self._seeding = None

    def _heard_refused_hello(self, read: Any, frame: Any) -> None:
        """Note a hello of this job that the header check refused (a field missing or of
        another type: ``read``, the map it read) as heard, as a hello refused for its
        incarnation's entries is: the ranks left waiting for its rank then hear that its hello
        was refused as malformed, not that it "never said hello" (``runs._hostless``), which
        sent its operator looking for a worker that had started. Only one of this protocol,
        job and a rank of it whose run id is an int and, under CURVE, whose key is its rank's."""
        if type(read) is not dict or read.get("op") != "hello" or read.get("v") != PROTOCOL_VERSION:
            return
        rank, run = read.get("rank"), read.get("run")
        if read.get("job") != self.config.job_id or type(rank) is not int or type(run) is not int:
            return
        try:  # a rank of the job, and its key: as any request of this job's is held
            self._check_sender(read, frame)
        except WireError:
            return
        self._next_job()  # as _op_hello: a job over is held no more
        self._heard_run(rank, run)

    def _peer(self, frames: Sequence[Any]) -> tuple[str, bool]:
        """Who sent ``frames``: its address, and the rank whose key signed it (under CURVE);
        and whether a key of the job's did (its refusals are logged in the ranks' pool)."""
        frame = frames[-1]  # any frame past the routing id tells
        signer = signer_rank(frame, self._key_rank)
        return peer_name(frame, signer), signer is not None

    def _log_refusal(self, frames: Sequence[Any], exc: Exception) -> None:
        """Log a refused request, a bad one (a WireError not ``quiet``) as a warning and one
        with a ``log_line`` of its own (a run's, :mod:`~distconv.sync.ps.runs`) at INFO, each
        bounded per peer and cause (:class:`~distconv.sync.ps.request_log.RefusalLog`)."""
        if isinstance(exc, WireError) and not getattr(exc, "quiet", False):
            peer, known = self._peer(frames)
            line = f"bad request from {peer}: {exc}"
            self.refusals.note(logging.WARNING, peer, line, known=known)
        elif line := getattr(exc, "log_line", None):
            peer, known = self._peer(frames)
            self.refusals.note(logging.INFO, peer, f"{line} (from {peer})", known=known)

    def _log_unexpected(
        self, frames: Sequence[Any], header: dict[str, Any], exc: Exception
    ) -> None:
        """A failure no check foresaw (a shard bug): the first with its traceback, later ones
        bounded per peer and cause, so a peer repeating a message the checks miss cannot flood
        the log."""
        peer, known = self._peer(frames)
        what = f"{short(header.get('op'))} from {peer}"
        if self._traced:
            line = f"request {what} failed: {named(exc)}"
            self.refusals.note(logging.ERROR, peer, line, known=known)
        else:
            self._traced = True
            log.exception("shard %d: request %s failed", self.index, what)

    def _check_sender(self, header: dict[str, Any], frame: Any) -> None:
        if header["job"] != self.config.job_id:
            # the key first: a worker of this job's keys claiming another's rank under another
            # id is refused for the key, and claims no rank that the ranks waiting could hear of
            self._check_key(header["rank"], frame)
            served = repr(self.config.job_id)
            other = WireError(another_id_text(header["rank"], short(header["job"]), served))
            other.fields = REFUSED_JOB  # the reply's, as a _Refused's (handle)
            # logged once a worker: its hello's refusal, not again at its bye, which follows
            other.quiet = header["op"] == "bye"
            self._note_other_id(header, str(other))  # the ranks waiting for it hear it
            raise other
        rank = header["rank"]
        if not 0 <= rank < self.config.workers:
            raise WireError(f"rank {rank} outside 0..{self.config.workers - 1}")
        self._check_key(rank, frame)

    def _check_key(self, rank: Any, frame: Any) -> None:
        """Secure: refuse a request for ``rank`` sent with another worker's key."""
        if not self._key_rank:  # no CURVE: no key to read off each request's frame
            return
        signer = signer_rank(frame, self._key_rank)
        if signer != rank:
            raise WireError(f"rank {rank} sent with another worker's key (rank {signer}'s)")

    # -- values and state ---------------------------------------------------------------------
    def _blocks(self, header: dict[str, Any]) -> list[tuple[int, _Block]]:
        self._refuse_unseeded(header)
        out, ids = [], int_list(header, "blocks")
        if len(set(ids)) != len(ids):  # each repeat would cost a copy of its block
            raise WireError(f"blocks {short(ids)} repeat")
        for bid in ids:
            if bid not in self.blocks:
                raise WireError(f"block {bid} is not held by shard {self.index}")
            out.append((bid, self.blocks[bid]))
        return out

    def _op_pull(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        blocks = self._blocks(header)
        if "rows" not in header:
            self._fits(sum(b.value.nbytes for _, b in blocks), "pull")
            out, fields = self._values([bid for bid, _ in blocks])
            self._reply(ident, header, out, **fields)
            return
        counts = int_list(header, "rows")
        if len(counts) != len(blocks) or len(arrays) != len(blocks):
            raise WireError(
                f"pull of rows: {len(counts)} counts, {len(arrays)} id arrays for "
                f"{len(blocks)} blocks"
            )
        for (bid, b), rows, n in zip(blocks, arrays, counts):
            check_row_ids(rows, n, b.start, b.stop, f"pull of block {bid}")
        row_bytes = (b.value[:1].nbytes for _, b in blocks)
        self._fits(sum(rows_bytes(n, r) for n, r in zip(counts, row_bytes)), "pull")
        out, fields = self._values([bid for bid, _ in blocks], arrays)
        self._reply(ident, header, out, **fields)

    def _op_get_state(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        """The blocks' optimizer state, and with ``with_values`` their values of the same moment
        (one frame after the state, as a pull's): an async checkpoint's two then agree."""
        blocks = self._blocks(header)
        keys = sorted(blocks[0][1].state) if blocks else []
        ids = [bid for bid, _ in blocks] if header.get("with_values", False) else []
        values = sum(self.blocks[bid].value.nbytes for bid in ids)
        self._fits(sum(b.state[k].nbytes for _, b in blocks for k in keys) + values, "get_state")
        out = [np.array(b.state[k], order="C") for _, b in blocks for k in keys]
        frame, fields = self._values(ids) if ids else ([], {})
        self._reply(ident, header, out + frame, keys=keys, **fields)

    def _op_set_state(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        if header["rank"] != 0:
            raise WireError("only rank 0 loads optimizer state")
        blocks = self._blocks(header)
        keys = header["keys"]
        if len(arrays) != len(blocks) * len(keys):
            raise WireError(
                f"set_state: {len(arrays)} arrays for {len(blocks)} blocks x {len(keys)} keys"
            )
        # every array is checked before any is written: a refused set_state changes nothing
        it, writes = iter(arrays), []
        for bid, b in blocks:
            if not all(type(k) is str for k in keys) or sorted(keys) != sorted(b.state):
                raise WireError(
                    f"set_state keys {short(keys)}, the optimizer keeps {sorted(b.state)}"
                )
            for k in keys:
                a = next(it)
                if a.shape != b.state[k].shape or a.dtype != b.state[k].dtype:
                    raise WireError(
                        f"set_state block {bid} {k!r}: {a.dtype}{a.shape}, expected "
                        f"{b.state[k].dtype}{b.state[k].shape}"
                    )
                writes.append((b.state[k], a))
        for target, a in writes:
            target[...] = a
        self._reply(ident, header)

    # -- pushes -------------------------------------------------------------------------------
    def _op_push(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        """A push of one or more parameters' gradients: all checked before any is kept."""
        self._refuse_unseeded(header)
        # each field refused on its own: one sentence for both said "count 2 < 0" of a bad lr
        if header["count"] < 0:
            raise WireError(f"push: count {header['count']} is below 0")
        lr = header["lr"]
        # NaN passes "< 0"; 0 is a schedule's factor 0 (set_lr_scale), which the others take
        if not math.isfinite(lr) or lr < 0:
            raise WireError(f"push: lr {lr} is not a finite number >= 0")
        params, ids = self._push_blocks(header)
        parts = self._gradient_parts(header, params, ids, arrays)
        rank = header["rank"]
        if self.config.mode == "sync":  # checked once per block, on the ranks' sum
            self._collect_push(ident, header, params, parts)
            if self.failed:  # _fail answered this push with the cause
                return
        else:
            self._refuse_repeat(rank, header["step"], params)
            self._check_finite(rank, ids, parts)
            self._apply_async(ident, header, params, parts)
            self.pushed.setdefault(rank, {}).update(dict.fromkeys(params, header["step"]))
        # counted once accepted: a push refused above (stale, repeated) raised before here
        self.stats.pushes += len(params)
        self.stats.push_messages += 1
        self.last_step[rank] = header["step"]

    def _refuse_repeat(self, rank: int, step: int, params: list[int]) -> None:
        """Async: refuse a push of a parameter for a step its rank pushed it for already, or
        after (a worker's steps only go up; its hello starts them afresh): it was applied
        again, as sync mode refuses it (a replayed push, or a worker's bug)."""
        done = self.pushed.get(rank, {})
        if (p := next((p for p in params if step <= done.get(p, -1)), None)) is not None:
            raise WireError(
                f"rank {rank} pushed parameter {self.params[p].name} for step {step} after "
                f"its push for step {done[p]}: a step's gradient is applied once"
            )

    def _push_blocks(self, header: dict[str, Any]) -> tuple[list[int], list[int]]:
        """The push's parameters and block ids, checked: distinct parameters this shard holds
        blocks of, each followed by exactly those blocks, a version per block from 0 to the
        block's (both modes; async reads them), and a sparse table's rows alone in a message."""
        params, ids = int_list(header, "params"), int_list(header, "blocks")
        int_list(header, "versions")
        if not params or len(set(params)) != len(params):
            raise WireError(f"push: parameters {short(params)} are none or repeat")
        if "rows" in header and len(params) != 1:
            raise WireError(f"push of rows carries {len(params)} parameters, must carry one")
        expected: list[int] = []
        for p in params:
            if p not in self.by_param:  # also a negative index, which would wrap around
                raise WireError(f"push of parameter {p}: this shard holds no block of it")
            expected += self.by_param[p]
        if ids != expected:
            raise WireError(
                f"push of parameters {short(params)}: blocks {short(ids)}, this shard holds "
                f"{short(expected)}"
            )
        if len(header["versions"]) != len(ids):
            raise WireError(f"push: {len(header['versions'])} versions for {len(ids)} blocks")
        for bid, v in zip(ids, header["versions"]):  # async staleness is now minus this
            if not 0 <= v <= self.blocks[bid].version:  # ahead: it never went stale, or dropped
                raise WireError(
                    f"push: block {bid} version {short(v)}, this shard's is "
                    f"{self.blocks[bid].version}: not a version it sent (one of another seed?)"
                )
        return params, ids

    def _gradient_parts(
        self, header: dict[str, Any], params: list[int], ids: list[int], arrays: list
    ) -> list:
        """Per block, ``(row ids or None, gradient)``: whole blocks, or a sparse push's rows."""
        if "rows" not in header:
            return [(None, g) for g in dense_gradients(self.blocks, self.params, ids, arrays)]
        spec = self.params[params[0]]
        if not spec.sparse:
            raise WireError(f"push of rows for {spec.name}, which is not sparse")
        counts = int_list(header, "rows")
        if len(counts) != len(ids) or len(arrays) != 2 * len(ids):
            raise WireError(
                f"sparse push: {len(counts)} row counts, {len(arrays)} arrays for "
                f"{len(ids)} blocks (want one count and [ids, rows] per block)"
            )
        parts = []
        for k, bid in enumerate(ids):
            rows, g = arrays[2 * k], arrays[2 * k + 1]
            b = self.blocks[bid]
            check_row_ids(rows, counts[k], b.start, b.stop, f"block {bid}")
            check_rows(g, spec, counts[k], f"rows of block {bid}")
            parts.append((rows, g))
        return parts

    def _op_stats(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        fields = {"stats": self.stats.as_dict(), "failed": self.failed, "seed": self.seed_id}
        self._reply(ident, header, **fields, **self._settings())

    def _op_beat(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        """A worker's heartbeat (async mode, :mod:`~distconv.sync.ps.beats`): the rank is
        alive (``handle`` noted it), whatever its main thread is doing."""
        self._reply(ident, header)

    def _op_checkpoint(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        if not self.config.checkpoint_dir:
            raise _Refused(f"shard {self.index} has no --checkpoint-dir")
        if header["rank"] != 0:  # a step below the newest prunes the parts above it
            raise WireError(f"only rank 0 writes checkpoints, got rank {header['rank']}")
        self._refuse_unseeded(header)
        keep = header.get("keep")
        if header["step"] < 0 or (keep is not None and keep < 1):
            raise WireError(f"checkpoint: step {header['step']} < 0 or keep {keep} < 1")
        self._reply(ident, header, **self.save_requested_part(header["step"], keep))
