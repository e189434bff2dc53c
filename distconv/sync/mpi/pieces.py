"""The piece plan and the pump: how gradient buckets go on the wire, one allreduce at a time.

A bucket is reduced in pieces, one ``Iallreduce`` each, in layout order on every rank (MPI needs
the same collective order everywhere). Piece boundaries come from the buckets' sizes, the byte
settings, ``stream`` and whether the communication thread runs (the default pieces and the
small last piece come with it only), never from timing: MPI may pick its reduction algorithm,
hence the order of the additions, by message size, so a plan that changed with timing would
change the result's last bits from run to run (with three ranks or more). Every rank makes the
same plan, but with ``overlap=None`` the thread is the machine's choice (its cores, a GPU):
results bitwise equal across machines, with three ranks or more, need the same ``overlap``
setting on both, or explicit ``piece_bytes`` and ``last_piece_bytes``.

Without the communication thread a bucket goes in one call, as PyTorch DDP's and Horovod's
buckets do. There the wire moves only inside MPI calls, so a bucket's pieces streamed between
its gradients bought 4-5 % at best (with numpy compute between them; nothing measurable with a
sleep), and each call is a meeting of the ranks: on a 2-core host with the ``mpich`` wheel, 100
gradients handed over back to back, one call per 4 MiB bucket read 0.90-1.21x a raw fused
``Allreduce`` where four 1 MiB pieces read 1.13-1.42x, lower in each of 14 runs. With the
thread, a bucket is cut into pieces of :data:`PIECE_BYTES`, each handed to the thread as soon as
the gradients under it are in, and the layout's last piece is cut small
(:data:`LAST_PIECE_BYTES`; never where the layout's last bucket cannot stream, see
:func:`~distconv.sync.mpi.buckets.build_buckets`). ``first_piece_bytes``, ``piece_bytes`` and
``last_piece_bytes`` are the knobs; a small first piece with pieces that double up to the
largest follows DDP's first bucket. The figures: docs/benchmarks.md, "Why the constants are
what they are".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from distconv.kernels.shape import is_int
from distconv.sync.base import SyncError, step_refusal
from distconv.sync.mpi.held import HeldInterrupt
from distconv.sync.other_model import whose

#: bytes of a full-size allreduce with the communication thread (a bucket's last piece may take
#: up to 1.5x that, a sliver joining it): a default 4 MiB bucket goes as four
PIECE_BYTES = 1 << 20
#: bytes of the layout's first allreduce in :func:`plan_pieces`; the pieces double from it up
#: to the full size (MPISync's default first piece is its full-size one: :func:`piece_sizes`)
FIRST_PIECE_BYTES = PIECE_BYTES
#: bytes of the layout's last allreduce with a communication thread: it starts after the last
#: gradient, so no backward hides it, and a small one leaves less exposed (figures in
#: docs/benchmarks.md)
LAST_PIECE_BYTES = 128 << 10


def piece_sizes(
    asked: tuple[int | None, int | None, int | None],
    thread: bool,
    bucket_bytes: int,
    largest: int = 0,
    widen: float = 1.0,
) -> tuple[int, int, int]:
    """First, full-size and last piece bytes: those ``asked``, and for each one not given (None)
    the default of a job with the communication ``thread`` or without: full pieces of
    :data:`PIECE_BYTES` and a last one of :data:`LAST_PIECE_BYTES` with it, a bucket in one
    call without (``bucket_bytes``, or ``largest``, the bytes of the largest gradient, where
    that is more: such a gradient has a bucket of its own; times ``widen`` where the wire
    dtype is wider than the gradients, see :func:`~.wire_dtypes.widening`). Every rank decides the
    thread alike and lays out the same gradients, so every rank gets the same plan."""
    first, full, last = asked
    full = full or (PIECE_BYTES if thread else int(max(bucket_bytes, largest) * widen))
    return first or full, full, last or (LAST_PIECE_BYTES if thread else full)


def check_sizes(required: Sequence[str] = (), **sizes: Any) -> list[int | None]:
    """``sizes`` (name: bytes) as Python ints, in order; ValueError naming the first not a
    positive integer (a numpy one is one, a bool is none). None passes, but for the names in
    ``required`` (None there would fail only at setup's layout)."""
    for name, value in sizes.items():
        if (value is not None or name in required) and (not is_int(value) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return [None if value is None else int(value) for value in sizes.values()]


def plan_pieces(
    buckets: Sequence[tuple[int, int]],
    first_bytes: int = FIRST_PIECE_BYTES,
    max_bytes: int = PIECE_BYTES,
    last_bytes: int | None = None,
) -> list[list[slice]]:
    """Cut the buckets of a layout into pieces, each reduced by one allreduce.

    The n-th piece of the layout (counting across buckets, in layout order) holds
    ``min(max_bytes, first_bytes * 2**n)`` bytes, at least one element; a bucket's last piece
    takes what is left, and a remainder under half the size the next piece would have joins the
    piece before it (one call fewer for a sliver). Depends on its arguments only.

    Args:
        buckets: per bucket, ``(elements, itemsize)`` of what goes on the wire; a bucket of 0
            elements (one reduced by other means, such as a 16-bit wire) gets no pieces.
        first_bytes: bytes of the first piece.
        max_bytes: bytes of a full-size piece; a bucket's last piece, with a sliver joined to
            it, may hold up to 1.5x that.
        last_bytes: bytes of the layout's very last piece; under ``max_bytes``, the end of the
            last bucket is cut again by :func:`shrink_tail`, so the one allreduce that no
            backward can hide (it starts after the last gradient) is short. None: no limit.

    Returns:
        Per bucket, the slices of its wire buffer, in order, covering it exactly.
    """
    plan: list[list[slice]] = []
    n = 0
    for elements, itemsize in buckets:
        pieces: list[slice] = []
        start = 0
        while start < elements:
            step = max(1, min(max_bytes, first_bytes << min(n, 62)) // itemsize)
            stop = min(elements, start + step)
            following = max(1, min(max_bytes, first_bytes << min(n + 1, 62)) // itemsize)
            if 0 < elements - stop < following // 2:  # a sliver: one call fewer
                stop = elements
            pieces.append(slice(start, stop))
            start, n = stop, n + 1
        plan.append(pieces)
    end = max((i for i, pieces in enumerate(plan) if pieces), default=None)
    if end is not None and last_bytes is not None and last_bytes < max_bytes:
        itemsize = buckets[end][1]
        plan[end][-1:] = shrink_tail(plan[end][-1], last_bytes // itemsize, max_bytes // itemsize)
    return plan


def shrink_tail(piece: slice, last: int, largest: int) -> list[slice]:
    """Cut ``piece`` (the layout's last) so that its pieces double from the end: ``last``
    elements at the very end, twice that before it, and so on up to ``largest``; what is left
    at the front under half the size it would have joins the piece after it.

    Args:
        piece: the slice to cut.
        last: elements of the final piece (at least one).
        largest: elements of a full-size piece (at least ``last``).
    """
    last = max(1, last)
    largest = max(last, largest)
    cut: list[slice] = []
    stop, size = piece.stop, last
    while stop - piece.start > size:
        cut.append(slice(stop - size, stop))
        stop, size = stop - size, min(largest, size * 2)
    if not cut or stop - piece.start >= size // 2:
        cut.append(slice(piece.start, stop))
    else:  # a sliver at the front joins the piece after it
        cut[-1] = slice(piece.start, cut[-1].stop)
    return cut[::-1]


def covering(sizes: Sequence[int], pieces: Sequence[slice]) -> list[tuple[int, ...]]:
    """Which of ``pieces`` (indices) each consecutive block of ``sizes`` elements overlaps."""
    out: list[tuple[int, ...]] = []
    start, k = 0, 0
    for size in sizes:
        stop = start + size
        while k < len(pieces) and pieces[k].stop <= start:
            k += 1
        last = k
        while last < len(pieces) and pieces[last].start < stop:
            last += 1
        out.append(tuple(range(k, last)))
        start = stop
    return out


class PiecePump:
    """The pieces of a layout, in order, each once everything under it has arrived.

    Without a communication thread, one is on the wire at a time: MPICH moves a non-blocking
    collective only inside MPI calls, so the main thread pumps at each gradient: it tests the
    piece on the wire (microseconds) and starts the next one once everything under it has
    arrived; at the end of the step it pumps with ``block``. With one (``hand_off``), a ready
    piece is handed to it at once, and the thread reduces them in that order.

    A piece waits for ``need[k]`` arrivals each step: the gradients it covers, where the layers
    write straight into the wire buffer, or one (its bucket, packed) where the bucket is staged
    or cast first. Pieces go in layout order, the same on every rank.

    Args:
        comm: the gradient communicator.
        in_place: ``MPI.IN_PLACE`` (None without MPI).
        op: ``MPI.SUM`` (None without MPI).
        pieces: per piece, in layout order, a function returning the array it reduces (read at
            start, as a bucket may swap its buffers between steps).
        need: per piece, how many arrivals it waits for each step.
        before_first: called once a step, before the step's first piece starts.
        hand_off: with a communication thread, called with a ready piece's index instead of
            starting it here (the thread reduces the pieces in the order they are handed over,
            which is layout order); None: this pump starts and tests the pieces itself.
    """

    def __init__(
        self,
        comm: Any,
        in_place: Any,
        op: Any,
        pieces: Sequence[Callable[[], Any]],
        need: Sequence[int],
        before_first: Callable[[], None],
        hand_off: Callable[[int], None] | None = None,
    ) -> None:
        self.comm, self.in_place, self.op = comm, in_place, op
        self.pieces, self.need, self.before_first = list(pieces), list(need), before_first
        self.hand_off = hand_off
        self._held = HeldInterrupt()
        self.reset()

    def reset(self) -> None:
        """A new step: nothing has arrived, the first piece is next."""
        self.left = [*self.need, 1]  # a last piece that never comes: no end-of-list test
        self.cursor, self.request, self.started = 0, None, False
        #: a piece's start (or hand-over) under way, not yet recorded: left True where it
        #: raised, so the piece may have started (see :func:`~.last_pieces.send_last`)
        self.starting = False

    def arrive(self, covered: Sequence[int]) -> None:
        """One arrival for each piece in ``covered``; then move the wire on, if it can."""
        left = self.left
        for k in covered:
            left[k] -= 1
        if self.request is not None or left[self.cursor] == 0:  # most gradients: neither
            self.pump()

    def pump(self, block: bool = False) -> None:
        """Test the piece on the wire and start the next ready one; ``block``: until all are."""
        while True:
            request = self.request
            if request is None:
                k = self.cursor
                if self.left[k] > 0:
                    return
                if not self.started:
                    self.started = True
                    self.before_first()
                # a Ctrl-C is raised once the piece is recorded (held): started or handed over
                # again, it would be one collective more on this rank alone
                if self.hand_off is not None:  # the thread's now: no request to test here
                    with self._held:
                        self.starting = True
                        self.hand_off(k)
                        self.cursor += 1
                        self.starting = False
                    continue
                with self._held:
                    self.starting = True
                    request = self.request = self.comm.Iallreduce(
                        self.in_place, self.pieces[k](), self.op
                    )
                    self.starting = False
            if block:
                request.Wait()
            elif not request.Test():
                return
            self.request = None
            self.cursor += 1

    @property
    def done(self) -> bool:
        """Whether every piece of the step has been reduced (or handed to the thread)."""
        return self.cursor == len(self.need) and self.request is None

    def drain(self) -> None:
        """Send what an abandoned step left and complete it: every rank sends every piece, so
        none stays unmatched. The step's check is left to its owner (no ``before_first``)."""
        self.started = True
        self.finish()

    def finish(self) -> None:
        """Count every piece as arrived (a gradient that never fired goes as it is) and block
        until every piece is reduced."""
        self.left = [0] * len(self.need) + [1]
        self.pump(block=True)


class Slot:
    """A parameter's place in the layout: its index in layout order, its bucket and position
    there, the pieces its gradient arrives at, and the step stamp it last fired at (the sync's
    bookkeeping, one attribute read per gradient).
    """

    __slots__ = ("bucket", "covered", "index", "position", "stamp")

    def __init__(self, index: int, bucket: Any, position: int, covered: tuple[int, ...]) -> None:
        self.index, self.bucket, self.position, self.covered = index, bucket, position, covered
        self.stamp = 0


def refusal(
    param: Any,
    known: bool,
    in_step: bool,
    step: int,
    given: Sequence[Any] = (),
    closed: bool = False,
) -> SyncError:
    """Why the gradient of ``param`` (``known``: it has a place in the layout) cannot be taken:
    after close (``closed``), outside a step, not given to setup (one of ``given``, the
    parameters setup was given, that has no place was frozen when the buckets were laid out;
    one of another model's, of a name one of ``given`` has, is said to be so), or fired twice
    in ``step``."""
    name = param.name
    if closed:
        return step_refusal(name, in_step, closed=True)
    if in_step and not known and any(p is param for p in given):
        return SyncError(
            f"gradient of {name!r}, frozen when this step's buckets were laid out: unfreeze it "
            "between steps (the next start_step lays the buckets out again)"
        )
    return step_refusal(name, in_step, known, f"step {step}", "" if known else whose(param, given))


class WirePlan:
    """A layout's pieces, for :class:`PiecePump`, and what arrives at which of them.

    Args:
        buckets: the layout's :class:`~distconv.sync.mpi.buckets.Bucket`\\ s, in order.
        stream: let the pieces of a bucket that streams go as their gradients arrive; False:
            every piece waits for its whole bucket.
        whole: give each bucket without pieces but with a wire buffer (a 16-bit wire, reduced
            by hand) one item of its own at its place in layout order, which waits for the
            packed bucket: for a communication thread, which reduces it whole (owner's piece
            None). False: such a bucket is no part of the plan (the main thread reduces it at
            the end of the step).

    Attributes:
        pieces: every piece in layout order, as a function returning its slice of the bucket's
            wire buffer.
        need: per piece, how many arrivals it waits for each step.
        slots: per parameter name, its :class:`Slot`: the pieces its gradient arrives at (in a
            bucket of several pieces that :attr:`~distconv.sync.mpi.buckets.Bucket.streams`;
            else none).
        at_pack: per bucket, the pieces that arrive once it is complete and packed (the other
            buckets': a bucket of one piece needs no count per gradient to know it is ready).
        owners: per piece, its bucket and its index among the bucket's pieces (None: the
            whole bucket).
    """

    def __init__(self, buckets: Sequence[Any], stream: bool = True, whole: bool = False) -> None:
        self.pieces: list[Callable[[], Any]] = []
        self.need: list[int] = []
        self.slots: dict[str, Slot] = {}
        self.at_pack: list[tuple[int, ...]] = []
        self.owners: list[tuple[Any, int | None]] = []
        for bucket in buckets:
            first = len(self.pieces)
            if whole and bucket.compressed:
                self.pieces.append(lambda b=bucket: b.target)
                self.owners.append((bucket, None))
            self.pieces += [lambda b=bucket, s=s: b.target[s] for s in bucket.pieces]
            self.owners += [(bucket, j) for j in range(len(bucket.pieces))]
            mine = tuple(range(first, len(self.pieces)))
            streams = stream and bucket.streams and len(mine) > 1
            covered = covering([p.size for p in bucket.params], bucket.pieces)
            if not streams:
                covered = [()] * len(bucket.params)
            self.at_pack.append(() if streams else mine)
            need = [0 if streams else 1] * len(mine)
            for c in covered:
                for k in c:
                    need[k] += 1
            self.need += need
            for j, (p, c) in enumerate(zip(bucket.params, covered)):
                self.slots[p.name] = Slot(len(self.slots), bucket, j, tuple(first + k for k in c))

    def pump(
        self,
        comm: Any,
        in_place: Any,
        op: Any,
        before_first: Callable[[], None],
        hand_off: Callable[[int], None] | None = None,
    ) -> PiecePump:
        """A :class:`PiecePump` over these pieces (see its arguments)."""
        return PiecePump(comm, in_place, op, self.pieces, self.need, before_first, hand_off)
