"""Gradient buckets: the flat buffers the gradients live in, and how each is reduced."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from operator import attrgetter, is_
from typing import Any

import numpy as np

from distconv.backend import get_array_module, is_gpu_array
from distconv.optim import mean_scale
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi.comm import WireRefused
from distconv.sync.mpi.pieces import FIRST_PIECE_BYTES, PIECE_BYTES, plan_pieces
from distconv.sync.mpi.wire_dtypes import finite_16, summed_by_hand

#: per-step checks over every parameter read these through map(), which loops in C
_grad, _static = attrgetter("grad"), attrgetter("static")


#: what float16 gradients, each a sum over a rank's examples, did where a wire is refused
SUMS_OVERFLOWED = (
    "overflowed float16 (65504) before the wire, or were NaN: lower the examples a rank sums "
    "per step (--batch-size / --accumulate, or the Trainer's batch_size= / accumulate=), or "
    "train in bfloat16 or float32"
)


class Bucket:
    """Consecutive parameters (in firing order) whose gradients share one flat buffer.

    Building a bucket moves each parameter's gradient into the buffer and leaves ``param.grad``
    as a view of its slice, so the layers add straight into what is reduced.

    Args:
        index: position in the layout (buckets are reduced in this order on every rank).
        params: the parameters, all of one dtype and on one device.
        wire: the dtype on the wire, or None for the gradients' own.
        world_size: ranks in the job (a 16-bit wire buffer is padded to a multiple of it).
        spare: keep a second host buffer, zeroed by someone else while the layers use the
            first (see :meth:`clear`); worth it only where a communication thread zeroes it.

    Attributes:
        buffer: the flat gradients, where the parameters live (host or device).
        spare: the host buffer the gradients move to when a step ends, or None.
        host: the flat gradients on the host: ``buffer`` itself, or its staging copy.
        target: what the collective reduces: ``host``, or the wire-dtype copy of it.
        compressed: ``target`` holds 16-bit floats, which MPI's SUM cannot add.
        pending: how many parameters have not delivered their gradient this step.
        unpacked: the buffer holds this step's reduced gradients.
        pieces: the slices of ``target`` reduced by one call each (empty for a 16-bit wire):
            the whole of it, until :func:`build_buckets` sets the layout's piece plan.
    """

    def __init__(
        self,
        index: int,
        params: Sequence[Parameter],
        wire: np.dtype | None,
        world_size: int,
        spare: bool = False,
    ) -> None:
        self.index, self.params = index, list(params)
        first = self.params[0].grad
        xp = get_array_module(first)
        self.size = sum(p.size for p in self.params)
        self.buffer = xp.zeros(self.size, dtype=first.dtype)
        self.views = self._views(self.buffer)
        for p, view in zip(self.params, self.views):
            view[...] = p.grad
            p.grad = view
        # cupy gradients are staged through host memory, so any MPI (CUDA-aware or not) works
        self.on_device = is_gpu_array(self.buffer)
        double = spare and not self.on_device  # a device zeroes in an asynchronous kernel
        self.spare = np.zeros_like(self.buffer) if double else None
        self.spare_views = self._views(self.spare) if double else None
        self.host = np.zeros(self.size, first.dtype) if self.on_device else self.buffer
        self.target = self.host
        wire = self.host.dtype if wire is None else wire
        by_hand = summed_by_hand(wire)  # reduced in equal chunks, one a rank
        if wire != self.host.dtype or (by_hand and self.size % world_size):
            padded = -(-self.size // world_size) * world_size
            self.target = np.zeros(padded, dtype=wire)
        self.compressed = summed_by_hand(self.target.dtype)
        # what pack scales in: float32 (a 16-bit sum overflows, an average does not), or a
        # wider wire's own dtype (float64 from long double: float32 dropped what it carries)
        wide = self.target.dtype.itemsize > 4
        self.scaled_in = self.target.dtype if wide else np.dtype(np.float32)
        self.scratch = np.empty_like(self.target) if self.compressed else None
        # what one Iallreduce each reduces (none: a 16-bit wire, reduced by hand)
        self.pieces = [] if self.compressed else [slice(0, self.target.size)]
        self.examples = 0  # this rank's in the step (the sync's): what a refusal says
        self.reset()
        self.done = threading.Event()  # set by the communication thread once reduced
        self.error: BaseException | None = None

    def _views(self, flat: Any) -> list[Any]:
        """Each parameter's gradient as a view of its slice of ``flat``."""
        bounds = np.cumsum([0] + [p.size for p in self.params]).tolist()
        return [flat[a:b].reshape(p.shape) for p, a, b in zip(self.params, bounds, bounds[1:])]

    def adopt(self, position: int) -> None:
        """Make the gradient of the parameter at ``position`` its view again, copied in: a
        layer replaced it (``p.grad = p.grad + g``, where the contract says ``+=``) before it
        fired. Nothing of its slice has gone on the wire yet (a piece goes once every gradient
        under it has fired), so the reduction sums what the layer computed.

        Raises:
            SyncError: the new array has another shape.
        """
        p, view = self.params[position], self.views[position]
        if p.grad is None or p.grad.shape != view.shape:
            shape = None if p.grad is None else p.grad.shape
            raise SyncError(f"the gradient of {p.name!r} was replaced by one of shape {shape}")
        view[...] = p.grad
        p.grad = view

    def to_update(self, used: Any, slots: Mapping[str, Any]) -> list[Parameter]:
        """The parameters whose reduced gradients go to the optimizer: those that fired on some
        rank (``used``: flags by layout index, ``slots[name].index``; None: all of them).

        Raises:
            SyncError: the gradient of one of them was replaced (or the parameter frozen) after
                it fired; the optimizer would read that array, this rank's own, instead of the
                sum in the bucket.
        """
        params, views = self.params, self.views
        if used is not None and params:  # a bucket's slots are consecutive in layout order
            first = slots[params[0].name].index
            fired = used[first : first + len(params)]
            if not fired.all():
                params, views = list(compress(params, fired)), list(compress(views, fired))
        if not all(map(is_, map(_grad, params), views)):  # one pass in C: once a step each
            p = next(p for p, v in zip(params, views) if p.grad is not v)
            raise SyncError(
                f"the gradient of {p.name!r} was replaced, or the parameter frozen, after it "
                "fired (on some rank): it belongs to the sync until finish_step returns "
                "(change it in place, or before it fires)"
            )
        return list(params)

    def reset(self) -> None:
        """A new step: no gradient has fired yet."""
        self.pending, self.unpacked = len(self.params), False

    @property
    def casts(self) -> bool:
        """Whether the wire carries another dtype than the gradients."""
        return self.target is not self.host

    @property
    def streams(self) -> bool:
        """Whether the layers write straight into what goes on the wire (a host buffer, no
        cast), so a piece may go as soon as the gradients under it have fired."""
        return not (self.on_device or self.casts or self.compressed)

    @property
    def averages(self) -> bool:
        """Whether :meth:`pack` turns the sums into averages itself: a cast bucket, or 16-bit
        gradients, whose optimizer could not fold ``1 / examples`` into 16-bit scalars."""
        return self.casts or self.host.dtype.itemsize <= 2

    def pack(self, scale: float = 1.0) -> None:
        """Bring the gradients to the host and into the wire dtype (no-ops where not needed).

        A bucket that :attr:`averages` is multiplied by ``scale`` (1 / the step's global example
        count) on the way, in float32 (a wider gradient's sum over many examples may pass a
        16-bit wire's range where its average does not) or in the wire dtype where that is
        wider. float16 gradients are sums over this rank's :attr:`examples` themselves: they
        overflowed already, in the layers, where that count times their mean passes 65,504.
        """
        if self.on_device:
            self.buffer.get(out=self.host)
        if self.averages and (self.casts or scale != 1.0):
            out = self.target[: self.size]  # past a 16-bit wire's range: check_wire refuses it
            with np.errstate(over="ignore" if self.compressed else None):
                np.multiply(self.host, scale, out=out, dtype=self.scaled_in, casting="unsafe")

    def unpack(self) -> None:
        """The reduced gradients back into the gradient buffer (once a step; no-ops where the
        collective reduced it itself); a 16-bit wire's :meth:`check_wire` first (WireRefused)."""
        if self.unpacked:
            return
        self.check_wire()
        if self.target is not self.host:
            np.copyto(self.host, self.target[: self.size], casting="unsafe")
        self.unpacked = True
        if self.on_device:
            self.buffer.set(self.host)

    def check_wire(self) -> None:
        """Refuse a reduced 16-bit wire that holds NaN or infinity, before any optimizer reads it.

        float16 ends at 65,504: an average past it on a rank, or the ranks' sum of averages,
        becomes infinity on the wire where the gradients themselves were finite, and the
        optimizer would write it into the parameters without a word. The same on every rank
        (they hold bitwise the same sums), so every rank stops at the same bucket. The wire
        itself is checked (:func:`finite_16`); the native wires, as one process, are not.

        Raises:
            WireRefused: naming the bucket, its parameters and the way out.
        """
        if not self.compressed or finite_16(self.target[: self.size], self.scratch):
            return
        raise WireRefused(self._refusal())

    def _refusal(self) -> str:
        """Why the reduced wire is not finite, as far as this rank can tell: its own gradients
        (still in ``host`` where the wire is a copy; read only here, once refused) overflowed
        float16 before the wire, or were not finite, or the wire overflowed."""
        dtype, host = self.target.dtype, self.host[: self.size]
        names = ", ".join(p.name for p in self.params)
        head = f"gradient bucket {self.index} ({names}) is not finite after the {dtype} wire"
        own = None if self.target is self.host else finite_16(host, self.scratch)
        sums16 = host.dtype == np.float16
        if sums16 and own is not True:  # float16 sums over a batch: the likely cause
            n = self.examples
            whose = f"this rank's {n}" if own is False else f"a rank's ({n} on this rank)"
            return f"{head}: the gradients summed over {whose} examples {SUMS_OVERFLOWED}"
        if own is False:
            return (
                f"{head}: this rank's gradients were NaN or infinite before the wire; lower the "
                "learning rate or check the data"
            )
        whose = "another rank's" if own else "some rank's"
        # this rank's float16 sums fit, so another's did not, whatever the wire: the average,
        # each rank's sum over the step's examples of all ranks, fits where every sum does
        if sums16:
            return f"{head}: {whose} gradients, summed over its examples, {SUMS_OVERFLOWED}"
        if dtype == np.float16:  # wider gradients (or bfloat16 ones), averaged past its range
            return (
                f"{head}: an average gradient, or the ranks' sum of them, past float16's range "
                "(65504), or a NaN or infinite gradient on some rank; train with grad_dtype "
                "'bfloat16' or 'float32'"
            )
        # bfloat16 has float32's range: no finite average overflows it on the wire
        return (
            f"{head}: {whose} gradients were NaN or infinite before the wire; lower the "
            "learning rate or check the data"
        )

    def grad_scale(self, total: int) -> float:
        """What the optimizer multiplies this bucket's reduced gradients by to average them.

        The buffer holds sums over the step's ``total`` examples, and the optimizer folds
        ``1 / total`` into its own scalars (see :meth:`~distconv.optim.Optimizer.update`); a
        cast bucket carried averages already, and so did 16-bit gradients (see :meth:`pack`).
        """
        return 1.0 if self.averages else mean_scale(total)

    def clear(self) -> Any:
        """Leave every gradient zero for the next step.

        With a spare buffer the gradients move to it (zero already) and the used buffer,
        returned, becomes the spare: the caller zeroes it before this bucket's next
        :meth:`clear`, on the communication thread while the main thread goes on. Without
        one (no thread to hand the work to; a device, where zeroing is an asynchronous kernel)
        the buffer is zeroed in place, hot in cache after the optimizer's read; None.
        """
        if self.spare is None:
            self.buffer.fill(0)
            return None
        used, casts = self.buffer, self.casts
        self.buffer, self.spare = self.spare, used
        self.views, self.spare_views = self.spare_views, self.views
        for p, view in zip(self.params, self.views):
            p.grad = view
        self.host = self.buffer
        if not casts:
            self.target = self.host
        return used

    def reduce(self, comm: Any, wait: Callable[[Any], None], in_place: Any, op: Any) -> None:
        """The whole reduction of the packed bucket over ``comm``, each request ended by ``wait``.

        A native dtype is one in-place ``Iallreduce`` with ``op`` per piece. A 16-bit wire is
        reduced by hand: chunk r of every rank's buffer goes to rank r (``Ialltoall``, the
        reduce-scatter), which adds the chunks in float32 in rank order; then every rank gathers
        the 16-bit sums (``Iallgather``), so every rank holds bitwise the same result.
        """
        if not self.compressed:
            for j in range(len(self.pieces)):
                self.reduce_piece(comm, wait, in_place, op, j)
            return
        wire, parts = self.target, self.scratch
        wait(comm.Ialltoall(wire.view(np.uint8), parts.view(np.uint8)))
        with np.errstate(over="ignore", invalid="ignore"):  # no warning: check_wire refuses
            chunk = parts.reshape(comm.Get_size(), -1).astype(np.float32).sum(axis=0)
            chunk = chunk.astype(wire.dtype)  # ranks' inf + -inf: NaN; a sum past its range: inf
        wait(comm.Iallgather(chunk.view(np.uint8), wire.view(np.uint8)))

    def reduce_piece(
        self, comm: Any, wait: Callable[[Any], None], in_place: Any, op: Any, j: int
    ) -> None:
        """Piece ``j`` of a native-dtype bucket: one in-place ``Iallreduce``, ended by ``wait``."""
        wait(comm.Iallreduce(in_place, self.target[self.pieces[j]], op))

    def reduce_on_thread(
        self, comm: Any, wait: Callable[[Any], None], in_place: Any, op: Any, piece: int | None
    ) -> None:
        """The whole reduction (``piece`` None) or that of one piece; after the last, unpack a
        host bucket (a device bucket is unpacked by the main thread, which owns the device)."""
        if piece is None:
            self.reduce(comm, wait, in_place, op)
        else:
            self.reduce_piece(comm, wait, in_place, op, piece)
        if not self.on_device and self.ends_with(piece):
            self.unpack()

    def ends_with(self, piece: int | None) -> bool:
        """Whether reducing ``piece`` (None: the whole bucket) completes the bucket."""
        return piece is None or piece == len(self.pieces) - 1

    def describe(self) -> list[Any]:
        """What every rank must agree on: names, dtypes and sizes."""
        names = [p.name for p in self.params]
        sizes = [str(self.host.dtype), str(self.target.dtype), int(self.target.size)]
        return [names, *sizes, [p.stop - p.start for p in self.pieces]]


def layout_params(order: Sequence[str], params: Sequence[Parameter]) -> list[Parameter]:
    """The trainable ``params`` in the order of the names in ``order``, the rest after them in
    reverse network order (backward's likely order); frozen parameters have no place."""
    known = {p.name: p for p in params if not p.static}
    names = [n for n in dict.fromkeys(order) if n in known]
    placed = set(names)
    names += [p.name for p in reversed(params) if p.name in known and p.name not in placed]
    return [known[n] for n in names]


def grads_moved(buckets: Sequence[Bucket], params: Sequence[Parameter]) -> bool:
    """Whether a parameter was frozen, unfrozen or cast since ``buckets`` were built: its
    ``grad`` is no longer its bucket's view, so the layers would add where nothing is reduced
    (one identity test per parameter)."""
    laid = sum(len(b.params) for b in buckets)
    if laid != len(params) - sum(map(_static, params)):
        return True
    return not all(all(map(is_, map(_grad, b.params), b.views)) for b in buckets)


def detach_gradients(buckets: Sequence[Bucket]) -> None:
    """Give each parameter of ``buckets`` a copy of its gradient, so that what MPI (or the
    communication thread) still writes into the buffers of an abandoned step never reaches it;
    one frozen (no gradient) or given another array since has let go of its buffer already."""
    for bucket in buckets:
        for p, view in zip(bucket.params, bucket.views):
            if p.grad is view:
                p.grad = view.copy()


def build_buckets(
    params: Sequence[Parameter],
    bucket_bytes: int,
    wire: np.dtype | None,
    world_size: int,
    spare: bool = False,
    first_piece_bytes: int = FIRST_PIECE_BYTES,
    piece_bytes: int = PIECE_BYTES,
    last_piece_bytes: int | None = None,
    stream: bool = True,
) -> list[Bucket]:
    """Group ``params`` (in firing order) into buckets of about ``bucket_bytes`` bytes.

    A bucket closes when the next gradient would overflow it, or has another dtype or device.
    ``spare``: see :class:`Bucket`. Each bucket's pieces follow :func:`plan_pieces` with
    ``first_piece_bytes``, ``piece_bytes`` and ``last_piece_bytes``; the last only where
    ``stream`` and the layout's last bucket on the wire :attr:`~Bucket.streams` (decided from
    the configuration and sizes, so alike on every rank): elsewhere every piece of that bucket
    is released at once, when it is complete, and the cut would only add calls.
    """
    groups: list[list[Parameter]] = []
    size = 0
    for p in params:
        kind = (p.grad.dtype, is_gpu_array(p.grad))
        last = groups[-1][-1] if groups else None
        same = last is not None and (last.grad.dtype, is_gpu_array(last.grad)) == kind
        if not same or size + p.grad.nbytes > bucket_bytes:
            groups.append([])
            size = 0
        groups[-1].append(p)
        size += p.grad.nbytes
    buckets = [Bucket(i, g, wire, world_size, spare) for i, g in enumerate(groups)]
    wired = [b for b in buckets if b.target.size]
    if not (stream and wired and wired[-1].streams):
        last_piece_bytes = None
    sizes = [(0 if b.compressed else b.target.size, b.target.itemsize) for b in buckets]
    plans = plan_pieces(sizes, first_piece_bytes, piece_bytes, last_piece_bytes)
    for bucket, pieces in zip(buckets, plans):
        bucket.pieces = pieces
    return buckets
