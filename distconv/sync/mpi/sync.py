"""Allreduce over MPI: gradients in buckets, reduced while backward goes on, a local optimizer.

Every rank runs the same optimizer on the same summed gradients, so every rank ends each step
with identical parameters (Horovod's ``DistributedOptimizer`` and PyTorch DDP's reducer are the
models). One step:

1. :meth:`MPISync.start_step` posts the ranks' agreement on step, layout and examples
   (:mod:`~distconv.sync.mpi.step_check`), completed before the first gradient collective.
2. Each gradient is a view into its bucket's flat buffer, so the layers' ``+=`` writes straight
   into what goes on the wire. When a bucket's last gradient fires, the bucket goes on the wire
   at once, in pieces of ``piece_bytes`` (1 MiB), one allreduce at a time, in layout order (MPI
   needs the same collective order on every rank).
3. :meth:`MPISync.finish_step` waits for the rest and runs the optimizer on the sums with
   ``grad_scale = 1 / global examples``, folded into the rule's own arithmetic (16-bit buckets
   are averaged in :meth:`~distconv.sync.mpi.buckets.Bucket.pack` instead), then zeroes the
   gradients (with a communication thread, by swapping in a spare buffer).

Buckets follow the order in which the first backward pass fired the parameters (before that,
the reverse of the network's order, DDP's guess too).

Overlap: MPICH makes no progress on a non-blocking collective while Python computes. A
communication thread (``overlap=True``, on its own duplicate communicator) reduces while
backward goes on, polling with short sleeps, or waiting in ``MPI_Wait`` where each rank has a
core to spare (``poll_seconds``). It pays only where compute leaves a core free (a GPU, spare
cores), so ``overlap=None`` turns it on there and otherwise the main thread tests the pieces at
each gradient. It needs ``MPI_THREAD_SERIALIZED`` or above; below that it is never started.

Compression: ``grad_dtype="float16"`` (or ``"bfloat16"``) halves the bytes; MPI's sum knows no
16-bit floats, so an ``Alltoall`` of 16-bit chunks, a float32 sum in rank order and an
``Allgather`` do it by hand, bitwise alike on every rank.

World size 1 runs the same code with :class:`SingleRankComm` standing in for MPI (no mpi4py).
Run as ``mpiexec -n N python -m mpi4py -m distconv train --sync mpi``: ``-m mpi4py`` and the
exception hook installed here make one rank's crash abort the job.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from distconv.backend import copy_into, is_gpu_array, to_host
from distconv.optim import Optimizer, mean_scale
from distconv.parameter import Parameter
from distconv.sync.base import SyncError, digest
from distconv.sync.local import LocalSync
from distconv.sync.mpi.buckets import (
    PIECE_BYTES,
    POLL_SECONDS,
    Bucket,
    CommThread,
    PiecePump,
    build_buckets,
    check_poll_seconds,
    wire_dtype,
)
from distconv.sync.mpi.comm import (
    SingleRankComm,
    allgather_bytes,
    difference_from,
    import_mpi,
    install_abort_hook,
    ranks_on_node,
    threads_allowed,
    usable_cores,
)
from distconv.sync.mpi.step_check import StepCheck

__all__ = ["DEFAULT_BUCKET_BYTES", "MPISync"]

#: gradient bytes per bucket: large enough that the per-call cost (tens of microseconds) is
#: small against the transfer, small enough that the first buckets start during backward
DEFAULT_BUCKET_BYTES = 4 << 20


class MPISync(LocalSync):
    """Data-parallel training over MPI: bucketed allreduce, then the optimizer on every rank.

    Args:
        optimizer: the update rule, run on every rank on the summed gradients, averaged inside
            it (``grad_scale``).
        comm: an mpi4py communicator; None takes ``MPI.COMM_WORLD``, or :class:`SingleRankComm`
            when mpi4py is not installed.
        bucket_bytes: gradient bytes per bucket (default :data:`DEFAULT_BUCKET_BYTES`, 4 MiB);
            a parameter larger than that gets a bucket of its own.
        grad_dtype: the dtype on the wire: None (the gradients' own), ``"float32"``,
            ``"float64"``, ``"float16"`` or ``"bfloat16"`` (summed in float32).
        overlap: reduce on a communication thread while backward goes on; None decides by the
            machine (see the module docstring). Ignored, with a logged reason, when MPI was
            initialised below ``MPI_THREAD_SERIALIZED``.
        piece_bytes: bytes per allreduce call; a bucket goes on the wire in pieces this size,
            one at a time (default :data:`~distconv.sync.mpi.buckets.PIECE_BYTES`, 1 MiB).
        poll_seconds: with the thread, the sleep between tests of a request while backward
            runs; 0 waits in ``MPI_Wait`` (a core of its own); None decides by the machine
            (0 with at least twice as many usable cores as ranks on the node, GPU run or not,
            counting a cgroup CPU quota: see :func:`~distconv.sync.mpi.comm.usable_cores`;
            else :data:`~distconv.sync.mpi.buckets.POLL_SECONDS`).

    Attributes:
        state: optimizer state per parameter name, identical on every rank.
        buckets: the current bucket layout.
        wire_bytes: bytes this rank has handed to the gradient collectives so far.
    """

    def __init__(
        self,
        optimizer: Optimizer,
        *,
        comm: Any = None,
        bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        grad_dtype: str | None = None,
        overlap: bool | None = None,
        piece_bytes: int = PIECE_BYTES,
        poll_seconds: float | None = None,
    ) -> None:
        super().__init__(optimizer)
        self.poll_seconds = check_poll_seconds(poll_seconds)
        for name, value in (("bucket_bytes", bucket_bytes), ("piece_bytes", piece_bytes)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.piece_bytes = piece_bytes
        self._wire = wire_dtype(grad_dtype)
        self.mpi = import_mpi() if comm is None or not isinstance(comm, SingleRankComm) else None
        if comm is None:
            comm = self.mpi.COMM_WORLD if self.mpi is not None else SingleRankComm()
        self.comm = comm
        self.rank, self.world_size = comm.Get_rank(), comm.Get_size()
        self.bucket_bytes, self.grad_dtype, self.overlap = bucket_bytes, grad_dtype, overlap
        self.buckets: list[Bucket] = []
        self.wire_bytes = 0
        self.sync_seconds = 0.0
        self.step = 0
        self._grad_comm: Any = None
        self._thread: CommThread | None = None
        self._slot: dict[str, tuple[int, int]] = {}
        self._layout_order: list[str] = []
        self._fired: list[str] = []
        self._recorded: list[str] = []
        self._next_launch = 0
        self._pump: PiecePump | None = None
        self._total = 0
        self._check = StepCheck(self.comm)
        self._in_step = False
        # one rank's uncaught exception aborts the job instead of leaving the others hanging
        self._restore_hook = install_abort_hook(comm) if self.world_size > 1 else None

    # -- start-up ---------------------------------------------------------------------------
    def setup(
        self,
        params: Sequence[Parameter],
        config: Mapping[str, Any] | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Check the job on every rank, broadcast rank 0's parameters and state, lay out buckets.

        ``state`` (a checkpoint's optimizer state) is given on rank 0 alone; the broadcast hands
        it to every other rank.
        """
        wire = {"sync.bucket_bytes": self.bucket_bytes, "sync.grad_dtype": self.grad_dtype}
        wire["sync.piece_bytes"] = self.piece_bytes
        super().setup(params, {**(config or {}), **wire}, state)
        self._grad_comm = self.comm.Dup()
        on_gpu = any(is_gpu_array(p.value) for p in self.params)
        local_ranks = ranks_on_node(self.comm, self.mpi)  # a collective: every rank calls it
        cores = usable_cores()
        if self.overlap is None:
            self.overlap = self.world_size > 1 and (on_gpu or cores > local_ranks)
        if self.overlap and not threads_allowed(self.mpi):
            self.overlap = False
        # the two paths start their collectives in different orders: every rank takes the same
        (without_thread,) = self.allreduce_sum([0.0 if self.overlap else 1.0])
        self.overlap = self.overlap and without_thread == 0
        if self.overlap:
            seconds = self.poll_seconds
            if seconds is None:  # a core for each rank's thread: it may wait in MPI_Wait
                seconds = 0.0 if cores >= 2 * local_ranks else POLL_SECONDS
            self._thread = CommThread(self._reduce, seconds)
        else:
            self._pump = PiecePump(self._grad_comm, self._in_place(), self._sum())
        self._lay_out([p.name for p in reversed(self.params)])

    def broadcast_parameters(self) -> None:
        """Copy rank 0's parameter values and optimizer state to every rank."""
        for p in self.params:
            self._bcast(p.value)
            for key in sorted(self.state[p.name]):
                self._bcast(self.state[p.name][key])

    def _bcast(self, array: Any) -> None:
        if self.world_size == 1:
            return
        host = np.ascontiguousarray(to_host(array))
        self.comm.Bcast(host.reshape(-1).view(np.uint8), root=0)
        copy_into(array, host)

    def all_equal(self, description: Mapping[str, Any]) -> None:
        """Compare a digest of ``description`` across ranks; on a mismatch, name the difference.

        Raises:
            SyncError: naming this rank, the first rank that differs, and the first differing key.
        """
        ours = json.loads(json.dumps(description, sort_keys=True, default=str))
        digests = allgather_bytes(self.comm, digest(ours).encode())
        if len(set(digests)) == 1:
            return
        other, diff = difference_from(self.comm, ours, [d == digests[self.rank] for d in digests])
        raise SyncError(f"rank {self.rank} and rank {other} run different jobs: {diff}")

    # -- layout -----------------------------------------------------------------------------
    def set_firing_order(self, names: Sequence[str]) -> None:
        """Use the Network's recorded firing order from the next step on."""
        super().set_firing_order(names)
        if self.params and not self._in_step:
            self._lay_out(self.firing_order)

    def _lay_out(self, order: Sequence[str]) -> None:
        """Rebuild the buckets in ``order`` (names not in it follow in reverse network order)."""
        known = {p.name: p for p in self.params}
        names = [n for n in dict.fromkeys(order) if n in known]
        placed = set(names)
        names += [p.name for p in reversed(self.params) if p.name not in placed]
        if names == self._layout_order:
            return
        params = [known[n] for n in names]
        spare = self._thread is not None  # it zeroes the used buffers while backward runs
        self.buckets = build_buckets(
            params, self.bucket_bytes, self._wire, self.world_size, spare, self.piece_bytes
        )
        self._layout_order = names
        self._slot = {p.name: (b.index, j) for b in self.buckets for j, p in enumerate(b.params)}
        self._layout = {f"bucket {b.index}": b.describe() for b in self.buckets}
        self._layout_hash = int(digest(self._layout)[:15], 16)

    # -- one step ---------------------------------------------------------------------------
    def start_step(self, examples: int) -> None:
        """Start checking that every rank is at this step with this layout (see
        :meth:`_complete_check`) and summing the examples."""
        if self._grad_comm is None:
            raise SyncError("MPISync.start_step called before setup")
        if self._in_step:  # complete the pending check first: no request is ever left behind
            self._complete_check()
            raise SyncError(
                f"start_step called while step {self.step} is unfinished: call finish_step first"
            )
        super().start_step(examples)
        if self.firing_order or self._recorded:
            self._lay_out(self.firing_order or self._recorded)
        self._check.post(self.step, self._layout, self._layout_hash, self._examples)
        for b in self.buckets:
            b.reset()
        self._fired, self._next_launch, self._in_step = [], 0, True
        if self._pump is not None:
            self._pump.reset()
        if self._thread is not None:
            self._thread.relax()

    def _complete_check(self) -> None:
        """Finish :meth:`start_step`'s exchange (:class:`StepCheck`): stop on a mismatch, else
        learn the step's global examples. Called before the step's first gradient collective.
        """
        total = self._check.complete()
        if total is not None:
            self._total = total

    def on_gradient(self, param: Parameter) -> None:
        """Count ``param`` in its bucket; a complete bucket starts its allreduce at once."""
        if not self._in_step:
            raise SyncError(f"gradient of {param.name!r} arrived outside a step (no start_step)")
        if param.name not in self._slot:
            raise SyncError(f"gradient of {param.name!r}, which was not given to setup")
        index, j = self._slot[param.name]
        bucket = self.buckets[index]
        if bucket.fired[j]:
            raise SyncError(f"parameter {param.name!r} fired twice in step {self.step}")
        bucket.fired[j] = True
        bucket.pending -= 1
        if not self._recorded:  # the first step's firing order, for the next layout
            self._fired.append(param.name)
        if bucket.pending == 0:
            self._launch_ready()
        if self._pump is not None and self._next_launch:  # something on the wire to move on
            self._pump.pump(self.buckets, self._next_launch)

    def _launch_ready(self, everything: bool = False) -> None:
        """Start the buckets that are complete, in layout order (all of them at the end)."""
        while self._next_launch < len(self.buckets):
            bucket = self.buckets[self._next_launch]
            if not (everything or bucket.pending == 0):
                return
            self._launch(bucket)
            self._next_launch += 1

    def _launch(self, bucket: Bucket) -> None:
        self._complete_check()
        bucket.pack(mean_scale(self._total))
        self.wire_bytes += bucket.target.nbytes
        if self._thread is not None:
            self._thread.submit(bucket)

    def _reduce(self, bucket: Bucket, wait: Callable[[Any], None]) -> None:
        """On the communication thread: reduce, and unpack a host bucket (a device bucket is
        unpacked by the main thread, which owns the device)."""
        bucket.reduce(self._grad_comm, wait, self._in_place(), self._sum())
        if not bucket.on_device:
            bucket.unpack()

    def finish_step(self) -> None:
        """Wait for every bucket, apply the optimizer (averaging inside it), zero gradients."""
        if not self._in_step:
            raise SyncError("finish_step without start_step")
        self._in_step = False
        began = time.perf_counter()
        self._complete_check()  # a step without buckets
        self._launch_ready(everything=True)
        try:
            if self._thread is not None:  # each bucket's optimizer while the next one travels
                for bucket in self.buckets:
                    self._thread.wait(bucket)
                    bucket.unpack()
                    self._apply(bucket)
            else:  # nothing travels while the optimizer runs: every gradient reduced first
                self._pump.pump(self.buckets, self._next_launch, block=True)
                for bucket in self.buckets:
                    if not bucket.pieces:  # a 16-bit wire, reduced by hand
                        bucket.reduce(self._grad_comm, lambda r: r.Wait(), None, None)
                    bucket.unpack()
                for bucket in self.buckets:
                    self._apply(bucket)
        finally:
            self.step += 1
            self.sync_seconds += time.perf_counter() - began
        if not self._recorded:
            self._recorded = list(self._fired)  # the first pass's order: next step's layout

    def traffic(self) -> dict[str, float]:
        """Bytes handed to the gradient collectives (sent and received alike), and the time
        ``finish_step`` took (waiting, the optimizer, zeroing)."""
        return {
            "bytes_pushed": self.wire_bytes,
            "bytes_pulled": self.wire_bytes,
            "sync_seconds": self.sync_seconds,
        }

    def _apply(self, bucket: Bucket) -> None:
        """The optimizer on the reduced gradients (views of the bucket), then zero gradients."""
        scale = bucket.grad_scale(self._total)
        for p in bucket.params:
            self.optimizer.update(p.value, p.grad, self.state[p.name], grad_scale=scale)
        used = bucket.clear()
        if used is not None:
            self._thread.zero(used)  # done before this bucket's next reduction

    # -- collectives --------------------------------------------------------------------------
    def _in_place(self) -> Any:
        return None if self.mpi is None else self.mpi.IN_PLACE

    def _sum(self) -> Any:
        return None if self.mpi is None else self.mpi.SUM

    def allreduce_sum(self, values: Sequence[float]) -> list[float]:
        """Sum small metrics over every rank (float64)."""
        buf = np.array([float(v) for v in values], dtype=np.float64)
        self.comm.Allreduce(self._in_place(), buf, self._sum())
        return buf.tolist()

    def barrier(self) -> None:
        """Return once every rank has called it."""
        self.comm.Barrier()

    # -- failure and shutdown -------------------------------------------------------------------
    def close(self) -> None:
        """Complete a pending step check, stop the communication thread, free the duplicate
        communicator, restore the hook; abort the job when an exception propagates."""
        if sys.exc_info()[0] is None:
            self._check.drain()  # every rank posted it in start_step: MPI must see it complete
        if self._thread is not None:
            self._thread.stop()
            self._thread = None
        if self._grad_comm is not None and self._grad_comm is not self.comm:
            self._grad_comm.Free()
        self._grad_comm = None
        if self.world_size > 1 and sys.exc_info()[0] is not None:
            # closed while an exception propagates (a ``finally``): the other ranks may be
            # waiting in a collective for this one, and nobody may reach the except hook
            error = sys.exc_info()[1]
            print(
                f"rank {self.rank}: {type(error).__name__}: {error}; aborting the MPI job",
                file=sys.stderr,
                flush=True,
            )
            self.comm.Abort(1)
        if self._restore_hook is not None:
            self._restore_hook()
        self._restore_hook = None
