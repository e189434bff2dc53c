"""Allreduce over MPI: gradients in buckets, reduced while backward goes on, a local optimizer.

Every rank runs the same optimizer on the same summed gradients, so every rank ends each step
with identical parameters (Horovod's ``DistributedOptimizer`` and PyTorch DDP's reducer are the
models). One step, as buckets:

1. :meth:`MPISync.start_step` starts one small non-blocking ``Iallgather`` of the step number,
   the bucket layout's hash and the rank's examples. It is completed and checked just before
   the step's first gradient collective (so a mismatch is named before anything can hang),
   by then long arrived: the ranks meet once a step, at the gradients, not twice.
2. Each gradient lives as a view into its bucket's flat buffer, so the layers' ``+=`` writes
   straight into what goes on the wire and nothing is copied twice. When the last gradient of a
   bucket fires, the bucket goes on the wire at once, in pieces of ``piece_bytes`` (1 MiB),
   one allreduce at a time, strictly in layout order (MPI needs the same collective order on
   every rank).
3. :meth:`MPISync.finish_step` waits for the rest and runs the optimizer on the summed
   gradients (the bucket's views) with ``grad_scale = 1 / global examples``: the optimizer
   folds the average into the scalars it multiplies by anyway (SGD, RMSProp and Adam add no
   pass over memory for it; Momentum and AdaGrad one ``s * g`` temporary; 16-bit buckets are
   averaged in :meth:`~distconv.sync.mpi.buckets.Bucket.pack`), so the sync is done when the
   reductions are. Then it zeroes the gradients; with a
   communication thread the layers get a spare buffer, zero, at once, and the thread zeroes
   the used one while backward goes on.

Buckets follow the order in which the first backward pass fired the parameters: before that
order is known, the reverse of the network's order (backward's usual order, DDP's guess too); the
first step records the real order, and the layout is rebuilt once if it differs.

Overlap: with ``overlap=True`` a communication thread (on its own duplicate communicator) runs each
bucket's allreduce while Python goes on with backward. While backward runs it polls the request with
short sleeps rather than blocking in ``MPI_Wait``, which spins and competes with compute; once
:meth:`finish_step` waits, it finishes in ``MPI_Wait`` at full speed. Where each rank has a core to
spare for it (twice as many usable cores as ranks on the node, GPU run or not, a cgroup CPU quota
counted) it waits in ``MPI_Wait`` throughout (``poll_seconds=0``): sleeping polls make each
reduction several times slower, and the last ones then spill past backward. MPICH makes no progress
on a non-blocking collective while Python computes, and a thread pays only where compute leaves a
core free (a GPU kernel, spare cores); on full cores it competes for them. So ``overlap=None`` turns
it on where gradients live on a GPU or the node has more usable cores than ranks, and otherwise the
main thread drives the pieces, testing them at each gradient (MPI progresses only inside MPI calls).
The thread needs MPI at ``MPI_THREAD_SERIALIZED`` or above (mpi4py asks for MULTIPLE); below that it
is never started, and the reason is logged once. MPICH's own progress thread
(``MPIR_CVAR_ASYNC_PROGRESS=1``) is the alternative with ``overlap=False``.

Compression: ``grad_dtype="float16"`` (or ``"bfloat16"`` with ``ml_dtypes``) puts half the bytes
on the wire. MPI's built-in sum knows no 16-bit floats, so the reduction is done by hand: an
``Alltoall`` of 16-bit chunks (the reduce-scatter), a float32 sum in rank order, an ``Allgather``
of the 16-bit result. Every rank gets bitwise the same gradient.

World size 1 runs the same code with :class:`SingleRankComm` standing in for MPI (no mpi4py).

Running: ``mpiexec -n N python -m mpi4py -m distconv train --sync mpi ...``; ``-m mpi4py`` (and
the exception hook here) makes one rank's crash abort the job. The ``mpi`` extra brings mpi4py
and the ``mpich`` wheel. Open MPI works with the same mpi4py wheel; it wants
``--allow-run-as-root`` only as root (containers), ``--oversubscribe`` for more ranks than cores.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np

from distconv.backend import copy_into, is_gpu_array, to_host
from distconv.optim import Optimizer, mean_scale
from distconv.parameter import Parameter
from distconv.sync.base import SyncError, digest, first_difference
from distconv.sync.local import LocalSync
from distconv.sync.mpi.buckets import (
    PIECE_BYTES,
    POLL_SECONDS,
    Bucket,
    CommThread,
    PiecePump,
    build_buckets,
    wire_dtype,
)
from distconv.sync.mpi.comm import (
    SingleRankComm,
    allgather_bytes,
    import_mpi,
    install_abort_hook,
    threads_allowed,
    usable_cores,
)

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
        if poll_seconds is not None and (
            isinstance(poll_seconds, bool)
            or not isinstance(poll_seconds, Real)
            or not math.isfinite(poll_seconds)
            or poll_seconds < 0
        ):
            raise ValueError(
                f"poll_seconds must be a finite number >= 0 or None, got {poll_seconds!r}"
            )
        self.poll_seconds = poll_seconds
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
        self._check: tuple[Any, np.ndarray, np.ndarray] | None = None
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
        local_ranks = self._local_ranks()  # a collective: every rank calls it, GPU or not
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

    def _local_ranks(self) -> int:
        if self.mpi is None:
            return 1
        node = self.comm.Split_type(self.mpi.COMM_TYPE_SHARED)
        try:
            return node.Get_size()
        finally:
            node.Free()

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
        texts = allgather_bytes(self.comm, json.dumps(ours, sort_keys=True).encode())
        other = next(r for r, d in enumerate(digests) if d != digests[self.rank])
        diff = first_difference(ours, json.loads(texts[other]))
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
        mine = np.array([self.step, self._layout_hash, self._examples], dtype=np.int64)
        every = np.zeros((self.world_size, 3), dtype=np.int64)
        self._check = (self.comm.Iallgather(mine, every), mine, every)
        for b in self.buckets:
            b.reset()
        self._fired, self._next_launch, self._in_step = [], 0, True
        if self._pump is not None:
            self._pump.reset()
        if self._thread is not None:
            self._thread.relax()

    def _complete_check(self) -> None:
        """Finish :meth:`start_step`'s exchange; stop on a mismatch, else learn the total.

        Called before the step's first gradient collective, on every rank, so ranks that
        disagree all stop here, with a message, before any of them can hang in a reduction.

        Raises:
            SyncError: the ranks are at different steps, or lay out buckets differently.
        """
        if self._check is None:
            return
        request, _, every = self._check
        request.Wait()
        self._check = None
        if len(set(every[:, 0].tolist())) > 1:
            steps = ", ".join(f"rank {r}: {s}" for r, s in enumerate(every[:, 0].tolist()))
            raise SyncError(f"ranks are at different steps ({steps})")
        if len(set(every[:, 1].tolist())) > 1:
            self._raise_layout_mismatch(every[:, 1])
        self._total = int(every[:, 2].sum())

    def _raise_layout_mismatch(self, hashes: np.ndarray) -> None:
        texts = allgather_bytes(self.comm, json.dumps(self._layout).encode())
        other = next(r for r, h in enumerate(hashes.tolist()) if h != hashes[self.rank])
        diff = first_difference(self._layout, json.loads(texts[other]))
        raise SyncError(
            f"step {self.step}: rank {self.rank} and rank {other} lay out gradient buckets "
            f"differently (parameters fired in another order?): {diff}"
        )

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
        if self._check is not None and sys.exc_info()[0] is None:
            request, self._check = self._check[0], None
            request.Wait()  # every rank posted it in start_step: MPI must see it complete
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
