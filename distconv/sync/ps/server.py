"""One parameter-server shard: a ROUTER socket, the blocks it holds, their optimizer state.

The shard knows no model. Worker 0 seeds it with its blocks (values, the optimizer's config);
then every worker pushes each parameter's gradient blocks, and the reply to a push carries the
blocks' new values.

- **sync**: the shard collects the pushes of all N workers for a parameter's step, sums them in
  rank order (bitwise reproducible), divides by the sum of their example counts, runs the
  optimizer once and answers all N pushes.
- **async**: each push is applied at once with its own example count. A push whose blocks have
  taken more than ``max_staleness`` updates since the worker last received them is dropped
  (counted in the stats, logged) and answered with the current values.

Every wait has a timeout. A worker missing from a sync step (or a collective) past the timeout
fails the job: every later request gets the message naming the rank, its host and its last step.
A malformed request gets an error reply (or is dropped and logged when it cannot be answered) and
the shard goes on serving everyone else.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket as pysocket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import zmq

from distconv.optim import Optimizer, optimizer_from_config
from distconv.runtime import DEFAULT_JOB_ID
from distconv.sync.base import first_difference
from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.blocks import ParamSpec
from distconv.sync.ps.wire import (
    DTYPES,
    MAX_MESSAGE_BYTES,
    WireError,
    int_list,
    pack,
    unpack_arrays,
    unpack_header,
)

log = logging.getLogger("distconv.pserver")

#: the collectives workers gather through shard 0, tagged "<kind>:<counter>"
GATHER_KINDS = ("allreduce", "barrier", "all_equal")

#: how often the loop wakes to check timeouts when no message arrives, in seconds
TICK = 0.1
#: how often the stats go to the log, in seconds
STATS_EVERY = 30.0


@dataclass
class ShardConfig:
    """A shard's settings (the ``distconv pserver`` flags).

    Attributes:
        bind: ``HOST:PORT``; port 0 picks a free port (printed and logged).
        shard: this shard's index, ``0 <= shard < num_shards``.
        num_shards: how many shards the job has.
        workers: how many workers the job has.
        mode: ``"sync"`` or ``"async"``.
        max_staleness: async only: the most updates a pushed block may lag behind.
        timeout: seconds any wait may take before the missing worker is named.
        on_worker_loss: async only: ``"fail"`` or ``"continue"`` without a silent worker.
        keys_dir: directory of the job's CURVE key files; None with ``insecure``.
        insecure: no encryption, no authentication (local experiments only).
        checkpoint_dir: where this shard writes its checkpoint parts.
        job_id: the job every request must name ("" accepts the empty id only).
        max_message_bytes: largest array payload of one message.
    """

    bind: str
    shard: int = 0
    num_shards: int = 1
    workers: int = 1
    mode: str = "sync"
    max_staleness: int = 4
    timeout: float = 60.0
    on_worker_loss: str = "fail"
    keys_dir: str | None = None
    insecure: bool = False
    checkpoint_dir: str | None = None
    job_id: str = DEFAULT_JOB_ID
    max_message_bytes: int = MAX_MESSAGE_BYTES

    def check(self) -> None:
        """Raise ValueError naming the first bad setting."""
        if not (0 <= self.shard < self.num_shards):
            raise ValueError(
                f"need 0 <= --shard < --num-shards, got {self.shard}, {self.num_shards}"
            )
        if self.workers < 1:
            raise ValueError(f"--workers must be >= 1, got {self.workers}")
        if self.mode not in ("sync", "async"):
            raise ValueError(f"--mode must be sync or async, got {self.mode!r}")
        if self.on_worker_loss not in ("fail", "continue"):
            raise ValueError(
                f"--on-worker-loss must be fail or continue, got {self.on_worker_loss!r}"
            )
        if self.max_staleness < 0 or self.timeout <= 0:
            raise ValueError("--max-staleness must be >= 0 and --timeout > 0")
        if not self.insecure and not self.keys_dir:
            raise ValueError("CURVE is on by default: pass --keys DIR, or --insecure to opt out")
        split_endpoint(self.bind)


def split_endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` as (host, port); ValueError unless both are present and the port is valid."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


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
    by_rank: dict[int, tuple[bytes, dict[str, Any], list[np.ndarray]]] = field(default_factory=dict)


@dataclass
class Stats:
    """What the shard reports on a ``stats`` request and in its log."""

    pushes: int = 0
    updates: int = 0
    drops: int = 0
    errors: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    update_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Shard:
    """A parameter-server shard.

    Args:
        config: the shard's settings (checked here).

    Attributes:
        endpoint: ``host:port`` actually bound, after :meth:`bind`.
        stats: counters reported on request and in the log.
    """

    def __init__(self, config: ShardConfig) -> None:
        config.check()
        self.config = config
        self.stats = Stats()
        self.endpoint = ""
        self.params: list[ParamSpec] = []
        self.blocks: dict[int, _Block] = {}
        self.by_param: dict[int, list[int]] = {}
        self.optimizer: Optimizer | None = None
        self.description: str | None = None
        self.failed: str | None = None
        self.completed: dict[int, int] = {}  # param -> last step applied (sync)
        self.waiting: dict[str, _Waiting] = {}  # "push:<param>" or "gather:<tag>"
        self.hosts: dict[int, str] = {}
        self.last_step: dict[int, int] = {}
        self.last_seen: dict[int, float] = {}
        self.left: set[int] = set()
        self.lost: set[int] = set()
        self._stop = False
        #: probes (``distconv.service.ServiceEndpoints``), set by :func:`run_shard`
        self.service: Any = None
        self._ctx = zmq.Context()
        self._auth = None
        self._key_rank: dict[bytes, int] = {}
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.linger = 0
        # zmq drops a connection whose frame exceeds this before the shard reads a byte of it
        self._sock.setsockopt(zmq.MAXMSGSIZE, config.max_message_bytes + (1 << 20))

    # -- lifecycle ----------------------------------------------------------------------------
    def bind(self) -> str:
        """Set up CURVE (unless insecure) and bind to the configured interface only."""
        host, port = split_endpoint(self.config.bind)
        if self.config.insecure:
            log.warning("shard %d: --insecure: no encryption, no authentication", self.index)
        else:
            public, secret, workers = keyfiles.server_keys(self.config.keys_dir)
            self._key_rank = workers
            self._auth = keyfiles.start_authenticator(self._ctx, set(workers))
            keyfiles.curve_server(self._sock, public, secret)
        address = f"[{host}]" if ":" in host else host
        try:
            if port == 0:
                port = self._sock.bind_to_random_port(f"tcp://{address}")
            else:
                self._sock.bind(f"tcp://{address}:{port}")
        except zmq.ZMQError as exc:  # address in use, no such interface: the user can fix it
            raise OSError(f"cannot bind {self.config.bind}: {exc}") from None
        self.endpoint = f"{host}:{port}"
        log.info(
            "shard %d/%d listening on %s (%s mode, %d workers, %s)",
            self.index,
            self.config.num_shards,
            self.endpoint,
            self.config.mode,
            self.config.workers,
            "insecure" if self.config.insecure else "CURVE",
        )
        return self.endpoint

    @property
    def index(self) -> int:
        return self.config.shard

    def stop(self) -> None:
        """Ask :meth:`serve` to return after the current message (signal-safe)."""
        self._stop = True

    def serve(self) -> None:
        """Answer requests until :meth:`stop`; write a checkpoint part on the way out."""
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        next_stats = time.monotonic() + STATS_EVERY
        while not self._stop:
            if poller.poll(TICK * 1000):
                self.handle(self._sock.recv_multipart(copy=False))
            now = time.monotonic()
            self._check_timeouts(now)
            self._report_probes()
            if now >= next_stats:
                self.log_stats()
                next_stats = now + STATS_EVERY
        if self.config.checkpoint_dir and self.blocks:
            log.info("shard %d: wrote %s on shutdown", self.index, self.save_part("last"))
        self.log_stats()

    def _report_probes(self) -> None:
        """Ready once seeded (or restored); a beat per loop turn while the job has not failed,
        so ``/healthz`` turns 503 when the loop hangs or the job has failed."""
        if self.service is None:
            return
        if self.service.ready != bool(self.blocks):
            self.service.set_ready(bool(self.blocks))
        if not self.failed:
            self.service.beat(self.stats.updates)

    def close(self) -> None:
        """Release the socket, the authenticator and the context."""
        self._sock.close(0)
        if self._auth is not None:
            self._auth.stop()
        self._ctx.term()

    def log_stats(self) -> None:
        log.info("shard %d stats %s", self.index, json.dumps(self.stats.as_dict()))

    # -- dispatch -----------------------------------------------------------------------------
    def handle(self, frames: Sequence[Any]) -> None:
        """Check one request and answer it (now, or when its sync step or collective is done)."""
        ident = frames[0].bytes
        self.stats.bytes_in += sum(len(f) for f in frames[1:])
        header: dict[str, Any] = {}
        try:
            if len(frames) < 2:
                raise WireError("empty message")
            header = unpack_header(frames[1].buffer)
            self._check_sender(header, frames[1])
            arrays = unpack_arrays(
                header, [f.buffer for f in frames[2:]], self.config.max_message_bytes
            )
            if self.failed and header["op"] not in ("stats", "bye"):
                raise _Refused(self.failed)
            self.last_seen[header["rank"]] = time.monotonic()
            getattr(self, f"_op_{header['op']}")(ident, header, arrays)
        except (WireError, _Refused) as exc:
            self.stats.errors += 1
            if isinstance(exc, WireError):
                log.warning("shard %d: bad request from %r: %s", self.index, ident, exc)
            self._reply(ident, header, error=str(exc))
        except Exception as exc:  # a request no check foresaw must not take the shard down
            self.stats.errors += 1
            log.exception("shard %d: request from %r failed", self.index, ident)
            self._reply(ident, header, error=f"shard error: {type(exc).__name__}: {exc}")

    def _check_sender(self, header: dict[str, Any], frame: Any) -> None:
        if header["job"] != self.config.job_id:
            raise WireError(f"job {header['job']!r}, this shard serves {self.config.job_id!r}")
        rank = header["rank"]
        if not 0 <= rank < self.config.workers:
            raise WireError(f"rank {rank} outside 0..{self.config.workers - 1}")
        if self._key_rank:
            key = keyfiles.user_id(frame)
            if self._key_rank.get(key) != rank:
                raise WireError(f"rank {rank} sent with another worker's key")

    def _reply(
        self,
        ident: bytes,
        request: dict[str, Any],
        arrays: Sequence[np.ndarray] = (),
        error: str | None = None,
        **fields: Any,
    ) -> None:
        header = {"op": "error" if error else "ok", "id": request.get("id", -1), **fields}
        if error:
            header["error"] = error
        frames = pack(header, arrays)
        self.stats.bytes_out += sum(a.nbytes for a in arrays)
        self._sock.send_multipart([ident, *frames], copy=False)

    # -- start-up -----------------------------------------------------------------------------
    def _settings(self) -> dict[str, Any]:
        c = self.config
        return {
            "shard": c.shard,
            "num_shards": c.num_shards,
            "workers": c.workers,
            "mode": c.mode,
            "max_staleness": c.max_staleness,
            "checkpoints": bool(c.checkpoint_dir),
        }

    def _op_hello(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        text = header["description"]
        self.hosts[header["rank"]] = header["host"]
        if self.description is None:
            self.description = text
        elif text != self.description:
            diff = first_difference(json.loads(text), json.loads(self.description))
            raise _Refused(f"rank {header['rank']} runs another job than rank(s) before: {diff}")
        self.left.discard(header["rank"])
        self._reply(ident, header, seeded=bool(self.blocks), **self._settings())

    def _op_seed(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        if header["rank"] != 0:
            raise WireError(f"only rank 0 seeds the shards, got rank {header['rank']}")
        params = [_param_spec(p) for p in header["params"]]
        try:
            optimizer = optimizer_from_config(header["optimizer"])
        except (ValueError, TypeError) as exc:
            raise WireError(f"optimizer config: {exc}") from None
        table = [_table_entry(e, params) for e in header["table"]]
        if not table:
            raise WireError("seed: no blocks")
        if len({e[0] for e in table}) != len(table) or len(arrays) != len(table):
            raise WireError("seed: block ids repeat, or blocks and arrays differ in number")
        blocks = {}
        for (bid, p, start, stop), value in zip(table, arrays):
            _expect(value, params[p], stop - start, f"block {bid}")
            copy = np.array(value)
            blocks[bid] = _Block(p, start, stop, copy, optimizer.init_state(copy))
        self.params, self.blocks, self.optimizer = params, blocks, optimizer
        self.by_param = {}
        for bid in sorted(blocks):
            self.by_param.setdefault(blocks[bid].param, []).append(bid)
        self.completed = {}
        self.waiting = {k: w for k, w in self.waiting.items() if k.startswith("gather:")}
        log.info(
            "shard %d: seeded with %d blocks of %d parameters, %s",
            self.index,
            len(blocks),
            len({b.param for b in blocks.values()}),
            optimizer,
        )
        self._reply(ident, header)

    # -- values and state ---------------------------------------------------------------------
    def _blocks(self, header: dict[str, Any]) -> list[tuple[int, _Block]]:
        if not self.blocks:
            raise _Refused("shard not seeded yet (worker 0 seeds it during setup)")
        out = []
        for bid in int_list(header, "blocks"):
            if bid not in self.blocks:
                raise WireError(f"block {bid} is not held by shard {self.index}")
            out.append((bid, self.blocks[bid]))
        return out

    def _op_pull(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        blocks = self._blocks(header)
        if "rows" not in header:
            # async pushes update values in place while a reply may still sit in ZeroMQ's queue
            values = [b.value.copy() if self.config.mode == "async" else b.value for _, b in blocks]
            self._reply(ident, header, values, versions=[b.version for _, b in blocks])
            return
        counts = int_list(header, "rows")
        if len(counts) != len(blocks) or len(arrays) != len(blocks):
            raise WireError(
                f"pull of rows: {len(counts)} counts, {len(arrays)} id arrays for "
                f"{len(blocks)} blocks"
            )
        for (bid, b), rows, n in zip(blocks, arrays, counts):
            self._check_rows(b, rows, n, f"pull of block {bid}")
        out, fields = self._values([bid for bid, _ in blocks], arrays)
        self._reply(ident, header, out, **fields)

    def _op_get_state(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        blocks = self._blocks(header)
        keys = sorted(blocks[0][1].state) if blocks else []
        out = [np.array(b.state[k], order="C") for _, b in blocks for k in keys]
        self._reply(ident, header, out, keys=keys)

    def _op_set_state(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        if header["rank"] != 0:
            raise WireError("only rank 0 loads optimizer state")
        blocks = self._blocks(header)
        keys = header["keys"]
        if len(arrays) != len(blocks) * len(keys):
            raise WireError(
                f"set_state: {len(arrays)} arrays for {len(blocks)} blocks x {len(keys)} keys"
            )
        it = iter(arrays)
        for bid, b in blocks:
            if set(keys) != set(b.state):
                raise WireError(f"set_state keys {keys}, the optimizer keeps {sorted(b.state)}")
            for k in keys:
                a = next(it)
                if a.shape != b.state[k].shape or a.dtype != b.state[k].dtype:
                    raise WireError(
                        f"set_state block {bid} {k!r}: {a.dtype}{a.shape}, expected "
                        f"{b.state[k].dtype}{b.state[k].shape}"
                    )
                b.state[k][...] = a
        self._reply(ident, header)

    # -- pushes -------------------------------------------------------------------------------
    def _op_push(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        p, rank = header["param"], header["rank"]
        ids = int_list(header, "blocks")
        if not self.blocks:
            raise _Refused("shard not seeded yet (worker 0 seeds it during setup)")
        if p not in self.by_param:  # also a negative index, which would wrap around
            raise WireError(f"push of parameter {p}: this shard holds no block of it")
        mine = self.by_param[p]
        if ids != mine:
            raise WireError(f"push of parameter {p}: blocks {ids[:8]}, this shard holds {mine[:8]}")
        if header["count"] < 0 or header["lr"] <= 0:
            raise WireError(f"push: count {header['count']} < 0 or lr {header['lr']} <= 0")
        parts = self._gradient_parts(header, ids, arrays)
        for _, g in parts:
            if not _finite(g):
                name = self.params[p].name
                msg = f"gradient of parameter {name} from rank {rank} is not finite (NaN/Inf)"
                if self.config.mode == "sync":
                    self._fail(msg)
                raise _Refused(msg)
        self.stats.pushes += 1
        self.last_step[rank] = header["step"]
        if self.config.mode == "sync":
            self._collect_push(ident, header, parts)
        else:
            self._apply_async(ident, header, parts)

    def _gradient_parts(self, header: dict[str, Any], ids: list[int], arrays: list) -> list:
        """Per block, ``(row ids or None, gradient)``: whole blocks, or a sparse push's rows."""
        spec = self.params[header["param"]]
        if "rows" not in header:
            if len(arrays) != len(ids):
                raise WireError(f"push: {len(arrays)} arrays for {len(ids)} blocks")
            for bid, g in zip(ids, arrays):
                _expect(g, spec, self.blocks[bid].stop - self.blocks[bid].start, f"block {bid}")
            return [(None, g) for g in arrays]
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
            self._check_rows(self.blocks[bid], rows, counts[k], f"block {bid}")
            _expect(g, spec, counts[k], f"rows of block {bid}")
            parts.append((rows, g))
        return parts

    def _check_rows(self, block: _Block, rows: np.ndarray, count: int, what: str) -> None:
        ok = rows.dtype == DTYPES["int64"] and rows.shape == (count,)
        if not ok or (count and (rows[0] < block.start or rows[-1] >= block.stop)):
            raise WireError(f"{what}: row ids must be {count} int64 in {block.start}:{block.stop}")
        if count > 1 and not (np.diff(rows) > 0).all():
            raise WireError(f"{what}: row ids must increase strictly")

    def _collect_push(self, ident: bytes, header: dict[str, Any], parts: list) -> None:
        p, step, rank = header["param"], header["step"], header["rank"]
        if step <= self.completed.get(p, -1):
            raise WireError(f"stale push: step {step} of parameter {self.params[p].name} is done")
        key = f"push:{p}"
        waiting = self.waiting.setdefault(key, _Waiting(f"step {step}", time.monotonic()))
        first = next(iter(waiting.by_rank.values()), None)
        if first is not None and first[1]["step"] != step:
            raise WireError(f"push for step {step}, shard is collecting step {first[1]['step']}")
        if first is not None and ("rows" in first[1]) != ("rows" in header):
            raise WireError(f"rank {rank} pushed {self.params[p].name} dense and sparse mixed")
        if rank in waiting.by_rank:
            raise WireError(f"rank {rank} pushed parameter {p} twice in step {step}")
        waiting.by_rank[rank] = (ident, header, parts)
        if len(waiting.by_rank) == self.config.workers:
            del self.waiting[key]
            self._apply_sync(p, step, waiting)

    def _apply_sync(self, p: int, step: int, waiting: _Waiting) -> None:
        ranks = sorted(waiting.by_rank)
        total = sum(waiting.by_rank[r][1]["count"] for r in ranks)
        ids = waiting.by_rank[ranks[0]][1]["blocks"]
        self.optimizer.lr = float(waiting.by_rank[0][1]["lr"])
        start = time.perf_counter()
        touched = []
        for i, bid in enumerate(ids):
            rows, grad = _mean_in_rank_order([waiting.by_rank[r][2][i] for r in ranks], total)
            self._update(self.blocks[bid], grad, rows)
            touched.append(rows)
        self.stats.update_seconds += time.perf_counter() - start
        self.stats.updates += 1
        self.completed[p] = step
        arrays, fields = self._values(ids, touched)
        for r in ranks:
            ident, header, _ = waiting.by_rank[r]
            self._reply(ident, header, arrays, **fields)

    def _values(self, ids: Sequence[int], touched: Sequence[np.ndarray | None]):
        """The reply to a push: each block's values, or its touched rows as [ids, rows] pairs."""
        fields: dict[str, Any] = {"versions": [self.blocks[b].version for b in ids]}
        if not touched or touched[0] is None:
            # sync: the next update waits for every worker's next push, so the frames are gone
            # by then and may alias the values; async updates any time: send a snapshot
            copy = self.config.mode == "async"
            return [
                np.array(self.blocks[b].value) if copy else self.blocks[b].value for b in ids
            ], fields
        arrays = []
        for bid, rows in zip(ids, touched):
            arrays += [rows, self.blocks[bid].value[rows - self.blocks[bid].start]]
        fields["rows"] = [len(r) for r in touched]
        return arrays, fields

    def _update(self, block: _Block, grad: np.ndarray, rows: np.ndarray | None = None) -> None:
        """One optimizer step on a block, or on some of its rows (sparse: the others keep their
        values and state, as if their gradient had not existed: "lazy" momentum and Adam)."""
        if rows is None:
            self.optimizer.update(block.value, grad, block.state)
        elif len(rows):
            local = rows - block.start
            value = block.value[local]
            state = {k: s[local] if s.ndim else s for k, s in block.state.items()}
            self.optimizer.update(value, grad, state)
            block.value[local] = value
            for k, s in block.state.items():
                if s.ndim:
                    s[local] = state[k]
        block.version += 1

    def _apply_async(self, ident: bytes, header: dict[str, Any], parts: list) -> None:
        ids = header["blocks"]
        versions = int_list(header, "versions")
        if len(versions) != len(ids):
            raise WireError(f"push: {len(versions)} versions for {len(ids)} blocks")
        staleness = max(self.blocks[b].version - v for b, v in zip(ids, versions))
        dropped = staleness > self.config.max_staleness
        if dropped:
            self.stats.drops += 1
            log.info(
                "shard %d: dropped a push of %s from rank %d: %d updates stale (max %d)",
                self.index,
                self.params[header["param"]].name,
                header["rank"],
                staleness,
                self.config.max_staleness,
            )
        else:
            self.optimizer.lr = float(header["lr"])
            start = time.perf_counter()
            for bid, (rows, g) in zip(ids, parts):
                grad = g / header["count"] if header["count"] > 0 else np.array(g)
                self._update(self.blocks[bid], grad, rows)
            self.stats.update_seconds += time.perf_counter() - start
            self.stats.updates += 1
        arrays, fields = self._values(ids, [rows for rows, _ in parts])
        self._reply(ident, header, arrays, dropped=dropped, **fields)

    # -- collectives and housekeeping ---------------------------------------------------------
    def _live(self) -> set[int]:
        return set(range(self.config.workers)) - self.lost

    def _op_gather(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        kind, _, number = str(header["tag"]).partition(":")
        if kind not in GATHER_KINDS or not number.isdigit():
            # a made-up tag would hold every other rank's gathers hostage until the timeout
            raise WireError(f"gather tag {header['tag']!r} is not one of {GATHER_KINDS} + ':N'")
        key = f"gather:{header['tag']}"
        waiting = self.waiting.setdefault(key, _Waiting(header["tag"], time.monotonic()))
        if header["rank"] in waiting.by_rank:
            raise WireError(f"rank {header['rank']} sent {header['tag']!r} twice")
        waiting.by_rank[header["rank"]] = (ident, header, [])
        self._finish_gather(key)

    def _finish_gather(self, key: str) -> None:
        waiting = self.waiting[key]
        if not self._live() <= set(waiting.by_rank):
            return
        del self.waiting[key]
        values = [
            waiting.by_rank[r][1]["value"] if r in waiting.by_rank else None
            for r in range(self.config.workers)
        ]
        for ident, header, _ in waiting.by_rank.values():
            self._reply(ident, header, values=values)

    def _op_stats(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        self._reply(
            ident, header, stats=self.stats.as_dict(), failed=self.failed, **self._settings()
        )

    def _op_bye(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        self.left.add(header["rank"])
        self._reply(ident, header)

    def _op_checkpoint(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        if not self.config.checkpoint_dir:
            raise _Refused(f"shard {self.index} has no --checkpoint-dir")
        if not self.blocks:
            raise _Refused("shard not seeded yet (worker 0 seeds it during setup)")
        self._reply(ident, header, path=str(self.save_part(str(header["step"]))))

    def save_part(self, step: str) -> Path:
        """Write this shard's blocks and optimizer state atomically; returns the file."""
        from distconv.checkpoint import save_tensors

        tensors = {}
        for bid, b in self.blocks.items():
            tensors[f"block.{bid}.value"] = b.value
            for k, a in b.state.items():
                tensors[f"block.{bid}.state.{k}"] = np.array(a, order="C")
        meta = {
            "shard": str(self.index),
            "step": step,
            "params": json.dumps([p.to_wire() for p in self.params]),
            "table": json.dumps(
                [[bid, b.param, b.start, b.stop] for bid, b in self.blocks.items()]
            ),
            "optimizer": json.dumps(self.optimizer.config() if self.optimizer else {}),
            "completed": json.dumps(self.completed),
        }
        directory = Path(self.config.checkpoint_dir)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"pserver-shard{self.index}-step{step}.safetensors"
        save_tensors(path, tensors, meta)
        return path

    def _fail(self, message: str) -> None:
        """The job cannot go on: answer everything held and everything later with ``message``."""
        if self.failed:
            return
        self.failed = message
        log.error("shard %d: job failed: %s", self.index, message)
        for waiting in self.waiting.values():
            for ident, header, _ in waiting.by_rank.values():
                self._reply(ident, header, error=message)
        self.waiting.clear()

    def _who(self, rank: int) -> str:
        host = self.hosts.get(rank, "unknown host")
        return f"rank {rank} (host {host}, last step {self.last_step.get(rank, 'none')})"

    def _check_timeouts(self, now: float) -> None:
        limit = self.config.timeout
        for key, waiting in list(self.waiting.items()):
            if now - waiting.since > limit:
                missing = sorted(self._live() - set(waiting.by_rank))
                who = ", ".join(self._who(r) for r in missing)
                self._fail(f"{who} sent nothing for {waiting.what} ({key}) within {limit:g} s")
                return
        if self.config.mode == "async":
            for rank, seen in list(self.last_seen.items()):
                if rank in self.left or rank in self.lost or now - seen <= limit:
                    continue
                message = f"{self._who(rank)} silent for {limit:g} s"
                if self.config.on_worker_loss == "fail":
                    self._fail(message)
                    return
                log.warning(
                    "shard %d: %s; --on-worker-loss continue: going on without it",
                    self.index,
                    message,
                )
                self.lost.add(rank)
                for key in [k for k in self.waiting if k.startswith("gather:")]:
                    self._finish_gather(key)


class _Refused(Exception):
    """A well-formed request the shard cannot serve (not seeded, job failed, NaN gradient)."""


def _param_spec(entry: Any) -> ParamSpec:
    ok = (
        isinstance(entry, list)
        and len(entry) == 4
        and isinstance(entry[0], str)
        and isinstance(entry[1], list)
        and all(isinstance(n, int) and n >= 0 for n in entry[1])
        and entry[2] in DTYPES
        and isinstance(entry[3], bool)
    )
    if not ok:
        raise WireError(f"seed: parameter entry {entry!r} is not [name, shape, dtype, sparse]")
    return ParamSpec(entry[0], tuple(entry[1]), entry[2], entry[3])


def _table_entry(entry: Any, params: Sequence[ParamSpec]) -> tuple[int, int, int, int]:
    ok = isinstance(entry, list) and len(entry) == 4 and all(isinstance(n, int) for n in entry)
    if not ok or not 0 <= entry[1] < len(params):
        raise WireError(f"seed: block entry {entry!r} is not [id, param, start, stop]")
    bid, p, start, stop = entry
    if not 0 <= start < stop <= params[p].rows:
        raise WireError(f"seed: block {bid} rows {start}:{stop} outside 0:{params[p].rows}")
    return bid, p, start, stop


def _finite(grad: np.ndarray) -> bool:
    """No NaN or Inf in ``grad``: a sum first (no temporary array), the exact test if it is not."""
    return bool(np.isfinite(grad.sum())) or bool(np.isfinite(grad).all())


def _mean_in_rank_order(parts: Sequence[tuple[np.ndarray | None, np.ndarray]], total: int):
    """Sum the ranks' gradients of one block in rank order, divide by ``total``.

    Returns ``(row ids or None, gradient)``. Dense parts add up whole; sparse parts add up over
    the union of their rows (``np.add.at`` visits the concatenation in order, so every row's
    sum runs in rank order too). Two runs add in the same order, bit for bit.
    """
    if parts[0][0] is None:
        if len(parts) == 1:
            return None, parts[0][1] / max(total, 1)
        grad = parts[0][1] + parts[1][1]
        for _, g in parts[2:]:
            grad += g
    else:
        ids = np.concatenate([rows for rows, _ in parts])
        rows, where = np.unique(ids, return_inverse=True)
        grad = np.zeros((len(rows), parts[0][1].shape[1]), dtype=parts[0][1].dtype)
        np.add.at(grad, where, np.concatenate([g for _, g in parts]))
    if total > 1:
        grad /= total
    return (None if parts[0][0] is None else rows), grad


def _expect(array: np.ndarray, spec: ParamSpec, rows: int, what: str) -> None:
    """WireError unless ``array`` is ``rows`` rows of ``spec`` in ``spec``'s dtype."""
    shape = (rows, spec.row_len)
    if array.shape != shape or array.dtype != DTYPES[spec.dtype]:
        raise WireError(
            f"{what} of {spec.name}: {array.dtype}{list(array.shape)}, expected "
            f"{spec.dtype}{list(shape)}"
        )


def run_shard(config: ShardConfig, service: Any = None) -> int:
    """Run one shard until SIGTERM or SIGINT; prints ``listening on HOST:PORT`` once bound.

    Args:
        config: the shard's settings.
        service: optional :class:`~distconv.service.ServiceEndpoints`, already serving; the
            loop marks it ready once seeded and beats it while healthy.
    """
    shard = Shard(config)
    shard.service = service
    try:
        endpoint = shard.bind()
        print(f"pserver shard {config.shard} listening on {endpoint}", flush=True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: shard.stop())
        shard.serve()
    finally:
        shard.close()
    return 0


def hostname() -> str:
    """This machine's name, as workers report it to the shards."""
    return os.environ.get("HOSTNAME") or pysocket.gethostname()
