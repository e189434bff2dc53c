"""The worker side of the parameter server: :class:`PServerSync`, a :class:`SyncStrategy`.

On ``inc_update`` the gradient's blocks are queued for their shards (:mod:`.outbox`). A shard's
queue goes as one message once it holds ``push_bytes`` (1 MiB by default) and the shard's
previous push has left; :meth:`finish_step` sends whatever is still queued, in messages of at
least ``push_bytes``, the shards taking turns (a pipeline: see :mod:`.outbox`). This is
deliberate: below ``push_bytes`` per shard, a model's gradients all go at ``finish_step``, one
message per shard and step, since on a busy machine a push costs the Python handling each
message at both ends more than its bytes; overlap with backward is for models big enough to
fill a push, as with DDP's buckets. The frames are handed to ZeroMQ without copying, and
ZeroMQ's own I/O thread sends them while backward goes on with the layers below (no Python
thread, so no fight over the GIL with backward). The reply to each push carries its blocks'
new values in one frame (:mod:`.inbox`); :meth:`finish_step` waits for all replies and puts
them into the parameters: a dense host parameter whose blocks all come in one reply takes its
slice of that frame as its new ``param.value`` (no copy; :meth:`ReplyWriter._adopt` is the one
place that replaces the array), any other is copied into. In sync mode a shard answers a push
only once every parameter in it is updated, so every push of a step is sent before the first
wait.

Collectives (the start-up digest, the barrier, metric sums) go through shard 0, since workers
have no direct links to each other (:mod:`.collectives`).
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

import numpy as np

from distconv.backend import to_host
from distconv.endpoint import join_endpoint, split_endpoint
from distconv.optim import Optimizer
from distconv.parameter import Parameter
from distconv.runtime import DEFAULT_JOB_ID, refuse_repeated_servers
from distconv.sync.ps.blocks import BLOCK_BYTES, rows_view
from distconv.sync.ps.channel import ShardChannel, _now
from distconv.sync.ps.collectives import Collectives
from distconv.sync.ps.config import usable_here
from distconv.sync.ps.endings import AbandonNote
from distconv.sync.ps.inbox import ReplyWriter
from distconv.sync.ps.late_ranks import LateRankRetries
from distconv.sync.ps.outbox import PushQueue
from distconv.sync.ps.pulls import Pulls
from distconv.sync.ps.remote_state import RemoteState
from distconv.sync.ps.reseed import Reseed
from distconv.sync.ps.setup_failure import SetupFailure
from distconv.sync.ps.sparse import SparseRows
from distconv.sync.ps.step_order import StepOrder
from distconv.sync.ps.wire import MAX_MESSAGE_BYTES
from distconv.sync.ps.worker_hello import WorkerHello
from distconv.sync.ps.worker_layout import WorkerLayout

log = logging.getLogger("distconv.pserver")


class PServerSync(
    WorkerHello,
    WorkerLayout,
    AbandonNote,
    SparseRows,
    Pulls,
    ReplyWriter,
    PushQueue,
    ShardChannel,
    RemoteState,
    Reseed,
    SetupFailure,
    LateRankRetries,
    Collectives,
    StepOrder,
):
    """Gradients go to parameter-server shards; the optimizer runs there.

    Args:
        optimizer: the update rule; its config seeds the shards, its ``lr`` (schedule included)
            travels with every push.
        rank: this worker's rank.
        world_size: how many workers the job has.
        pservers: the shards' ``HOST:PORT``, shard 0 first.
        keys_dir: the job's CURVE key directory (``distconv keys``); this worker reads
            ``worker-<rank>.key_secret`` and ``server.key``.
        insecure: no CURVE (local experiments only); logged.
        timeout: seconds a shard's shard-side wait may take; this worker waits ``GRACE`` times
            as long before naming a shard that does not answer.
        job_id: the id every request carries; shards serve only their own job.
        block_bytes: the largest block (see :mod:`distconv.sync.ps.blocks`).
        push_bytes: a shard's queued gradients leave before the end of the step once they
            reach this many bytes and its previous push has left (see :mod:`.outbox`);
            default 1 MiB; 0 sends each gradient as soon as the link is free.

    Attributes:
        mode: ``"sync"`` or ``"async"``, learnt from the shards in :meth:`setup`.
        max_staleness: async mode's bound, from the shards' hello (which must agree on it).
        sparse: names of the parameters marked ``sparse_rows`` (their blocks hold whole rows;
            they move a batch's rows only), learnt in :meth:`setup`.
        drops: gradients (one per parameter and shard) the shards dropped as too stale.
        push_messages: push messages sent so far (several gradients may share one).
        push_messages_applied, push_messages_dropped: async pushes (whose reply came) the shard
            applied (some parameter of) and dropped (all): see :meth:`_count_push`.
    """

    #: nothing of it writes through a fired gradient's own array until finish_step: the
    #: Network's first pass guards those arrays (:mod:`distconv.fired_writes`)
    fired_gradients_untouched = True
    fetches_rows = True  # sparse tables stay on the shards; a batch's rows are pulled
    also_needs_open = ("shard_stats",)  # asks every shard, on sockets close() closed

    def __init__(
        self,
        optimizer: Optimizer,
        *,
        rank: int,
        world_size: int,
        pservers: Sequence[str],
        keys_dir: str | None = None,
        insecure: bool = False,
        timeout: float = 60.0,
        job_id: str = DEFAULT_JOB_ID,
        block_bytes: int = BLOCK_BYTES,
        push_bytes: int | None = None,
    ) -> None:
        super().__init__(optimizer, rank, world_size)
        if not pservers or isinstance(pservers, str):  # a str was read a character at a time
            raise ValueError(f"pservers must list one HOST:PORT or more, got {pservers!r}")
        if bool(insecure) == bool(keys_dir):  # both: the keys would be dropped in silence
            raise ValueError("pass exactly one of keys_dir (CURVE, the default) and insecure=True")
        if not 0 < timeout < math.inf:  # NaN too: the first wait's poll refused it mid-setup
            raise ValueError(f"timeout must be a positive finite number of seconds, got {timeout}")
        if type(block_bytes) is bool or not isinstance(block_bytes, Integral) or block_bytes < 1:
            # here, not at setup's Layout: after the sockets opened and the shards were asked
            raise ValueError(f"block_bytes must be an int >= 1, got {block_bytes!r}")
        if push_bytes is not None and (
            isinstance(push_bytes, bool) or not isinstance(push_bytes, Integral) or push_bytes < 0
        ):
            # before the sockets open, which a refusal by the push queue left open
            raise ValueError(f"push_bytes must be an int >= 0 or None, got {push_bytes!r}")
        refuse_repeated_servers(pservers, "pservers")  # as --pservers: not two sockets to one
        self.endpoints = usable_here([join_endpoint(*split_endpoint(e)) for e in pservers])
        self.timeout = float(timeout)
        self.job_id = job_id
        self.sparse: set[str] = set()
        self.block_bytes = int(block_bytes)
        self.mode, self.max_staleness = "", None  # the shards say (hello): a run records them
        self.drops = self.push_messages_applied = self.push_messages_dropped = 0
        self._part_writers: list[int] = []
        self._bytes_pushed = self._bytes_pulled = 0
        self._sync_seconds = 0.0
        self._keys_dir, self._insecure = keys_dir, insecure
        if insecure:
            log.warning("rank %d: --insecure: talking to %s without CURVE", rank, self.endpoints)
        self._run = secrets.randbits(62)  # this worker's run of its rank (every request)
        self._setups = 0  # this run's setups begun, each hello's number (startup._count_setup)
        self._open_sockets(keys_dir)
        self._set_caps([MAX_MESSAGE_BYTES] * len(self._socks))  # until the shards say
        self._next_id = 0
        self._replies: dict[int, tuple[dict[str, Any], list[np.ndarray]]] = {}
        self._replies_dropped: dict[int, int] = {}  # requests given up on -> shard: replies dropped
        self._strays: dict = {}  # shard -> its replies ignored (a log_tally.LogTally)
        self._stray_at: dict[int, float] = {}  # shard -> when the latest of them was read
        self._trackers: dict[int, Any] = {}
        self._init_push_queue(len(self._socks), push_bytes)
        self._step = 0  # the run's step of the last push: start_at sets where a run goes on
        self._lagging = False  # a step's pushes may be on the shards, not in the parameters
        self._stamps_at_pull: list[tuple[Any, ...]] | None = None  # (see _stamps)
        self._collective = 0
        self._versions: list[int] = []
        self._rid_shard: dict[int, int] = {}
        self._rid_bytes: dict[int, int] = {}  # a large reply's (see channel.SLOW_LINK_BYTES)
        self._host: dict[str, np.ndarray] = {}  # host copies of device parameters
        self._by_name: dict[str, int] = {}  # parameter name -> index, from setup
        self._init_sparse_rows()
        self._init_reseed()

    # -- start-up -----------------------------------------------------------------------------
    def setup(
        self,
        params: Sequence[Parameter],
        config: Mapping[str, Any] | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Compare the job with every shard and rank, seed the shards (rank 0, keeping the
        optimizer state of parameters trained again: :mod:`.reseed`; then the restored
        ``state`` if any), pull (others)."""
        self.check_made()  # the base's setup, not called here, checks that first
        self._setups += 1  # this setup's number, which each of its hellos says (late rounds too)
        try:  # this rank's own failure (two parameters of one name, a layout): not the others'
            description = self._lay_out(params, config)
        except Exception as exc:  # they would wait for its hello (not a Ctrl-C: as MPI's)
            self.fail_setup(exc)
            raise
        try:  # the hello beats each shard from its reply on, in async mode (beats.py)
            heads = self._hello_and_check(description)  # again while ranks are late
            if self.is_chief:
                self._seed_keeping_state(heads)
                if state is not None:
                    self.load_state_dict(state)
            self._meet()  # the barrier: not refused before the first setup completed
            if not self.is_chief:
                self._pull_all()
        except BaseException:
            self._stop_heartbeat()  # a failed setup must not keep the rank alive on the shards
            raise
        self._set_up = True  # every rank holds rank 0's parameters: sums and barriers served
        log.info(
            "rank %d: %d parameters in %d blocks on %d shards (%s mode%s)",
            *(self.rank, len(self.params), len(self.layout.blocks), len(self._socks), self.mode),
            # an older shard's hello says no bound: "max staleness None" said what it did not
            f", max staleness {self.max_staleness}" * (self.max_staleness is not None),
        )

    # -- one step -----------------------------------------------------------------------------
    def start_at(self, step: int) -> None:
        """Number this worker's steps from the run's ``step`` (the contract's call): the next
        push is of ``step + 1``, as the Trainer counts, so the errors naming a step, the shards'
        bookkeeping (``last step``, a part's ``completed``, their probes) say the run's steps.
        Every rank of a sync job is told the same step; the shards' counters restart at the
        seed (sync) and at a worker's hello (async), so a resumed run may number lower."""
        super().start_at(step)
        self._step = int(step)

    def start_step(self, examples: int) -> None:
        super().start_step(examples)
        self._step += 1
        self._lagging = True  # until finish_step wrote every reply to its pushes
        self._stamps_at_pull = None  # its pushes move the shards on
        self._record_rows(True)

    def on_gradient(self, param: Parameter) -> None:
        """Queue ``param``'s gradient for its shards; out of the step's order, a SyncError
        (:class:`.step_order.StepOrder`) before anything is queued."""
        i = self._take_gradient(param)
        spec = self._specs[i]
        if spec.sparse:  # on its device: only the rows it pushes are copied to the host
            self._push_rows(i, rows_view(param.grad, spec))
            return
        grad = rows_view(to_host(param.grad), spec)
        for shard, blocks in self._targets[i]:
            self._queue_push(shard, i, blocks, [grad[b.start : b.stop] for b in blocks])

    def finish_step(self) -> None:
        """Send what is still queued; write each reply's new values as it arrives, and clear a
        gradient once every push holding it is answered (so it has left), while the other
        replies are still on their way. The values written reach the device even when a later
        reply is refused or a shard is lost (a SyncError): it holds what the host copies do."""
        self._finish_started_step()  # a SyncError without a step; the step ends here
        self._flush_pushes()
        inflight, self._inflight = self._inflight, {}
        pending: dict[int, int] = {}  # parameter -> its pushes not answered yet
        for sent in inflight.values():
            for i in {b.param for b in sent.blocks}:
                pending[i] = pending.get(i, 0) + 1
        began = _now()
        written: set[int] = set()
        step = f"step {self._step}"
        # a reply refused or a shard lost after others were written: the device holds them too
        with self._to_device_after(written):
            for rid, (header, arrays) in self._arrivals(list(inflight), step, stoppable=True):
                blocks, pushed = inflight[rid]
                # in place: the set moved after
                written |= self._write(blocks, arrays, header, pushed)
                params = {b.param for b in blocks}
                self._count_push(len(params), int(header.get("dropped", 0)))
                for i in params:
                    pending[i] -= 1
                    if not pending[i]:
                        self._zero_gradient(i)
        self._sync_seconds += _now() - began
        self._record_rows(False)
        self._zero_gradients(done=set(pending))
        self._lagging = False

    def _count_push(self, params: int, dropped: int) -> None:
        """Count a push of ``params`` parameters whose reply says ``dropped`` of them were
        dropped: in :attr:`drops`, and in async mode as a push message applied (a parameter
        or more) or dropped (all), as the shards count them (docs/protocol.md, "Stats"): a
        push of no example that dropped nothing is in neither."""
        self.drops += dropped
        if self.mode != "async":
            return
        if dropped >= params:
            self.push_messages_dropped += 1
        elif self._examples:
            self.push_messages_applied += 1

    def traffic(self) -> dict[str, float]:
        counts = ("push_messages_applied", "push_messages_dropped")
        pushes = {k: getattr(self, k) for k in counts} if self.mode == "async" else {}
        return {
            "bytes_pushed": self._bytes_pushed,
            "bytes_pulled": self._bytes_pulled,
            "sync_seconds": self._sync_seconds,
            "stale_dropped": self.drops,
            **pushes,  # async mode's alone: a sync shard applies each push (0 read as none)
            **super().traffic(),  # collective_seconds
        }

    def close(self) -> None:
        """Tell the shards this worker is done, and why if an exception propagates (best
        effort), then close the sockets. Dropped without it, a worker says a bye all the same,
        once collected or at exit (with an uncaught error there): :mod:`.worker_sockets`."""
        self._end_when_dropped.detach()
        self._record_rows(False)  # a step left open (or whose finish raised) lets go of its notes
        try:
            self._stop_heartbeat()
            if self.params:
                self._say_bye()
        finally:
            self._close_sockets()
