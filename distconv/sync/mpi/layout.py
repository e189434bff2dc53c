"""How :class:`~distconv.sync.mpi.sync.MPISync` lays its gradients out: buckets in the first
pass's firing order (before that, the reverse of the network's), their pieces on the wire, and
the layout's digest that every step's check compares across ranks."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from distconv.backend import is_gpu_array
from distconv.sync.description import digest
from distconv.sync.mpi.buckets import Bucket, build_buckets, layout_params
from distconv.sync.mpi.pieces import PiecePump, Slot, WirePlan, piece_sizes
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import UsedParams
from distconv.sync.mpi.wire_dtypes import widening


def devices(params: Sequence[Any]) -> str:
    """Where ``params`` live, for setup's job check: ``"cpu"``, ``"gpu"`` or ``"cpu+gpu"``.

    Ranks on different devices run the optimizer on different kernels (cupy's may round
    otherwise than numpy's), so their parameters, meant to be identical, could drift apart
    without a word; a device bucket's 16-bit wire is also checked on the main thread, a host
    one's on the communication thread, which after a refused wire go on differently. An item
    with no values (no parameter: setup refuses it) is on the host."""
    held = {"gpu" if is_gpu_array(getattr(p, "value", None)) else "cpu" for p in params}
    return "+".join(sorted(held)) or "cpu"


class Raising:
    """An iterable whose listing raises ``error`` again: what :func:`taken_once` hands the base
    setup for parameters whose own listing raised (a generator whose filter fails), so that it
    is raised inside setup's guard, where the other ranks are told."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __iter__(self) -> Iterator[Any]:
        raise self.error


def taken_once(params: Any) -> tuple[Any, str]:
    """``params`` as setup takes them, as a list (any iterable, as the base setup's
    :func:`~distconv.parameter.trainable` takes them: a generator read by :func:`devices` first
    was spent, and setup took no parameter), and :func:`devices` of them. No iterable is left
    as it is, on the host, for the base setup to refuse: there, inside setup's guard, the other
    ranks are told (:meth:`~.collectives.RankCollectives._fail_before_check`); raised before
    it, here (an item with no ``value``), they waited in the job check until the watchdog's
    timeout. So for an error raised while they are listed (a generator's own filter failing,
    on one rank alone): it is raised again where the base setup lists them. Iterable is as
    ``list`` takes it: ``iter``, not ``isinstance(params, Iterable)``, which misses a container
    iterable through ``__getitem__`` alone, said "cpu" for its GPU parameters, and a GPU rank
    and a CPU rank passed the job check together."""
    try:
        items = iter(params)
    except TypeError:
        return params, "cpu"
    try:
        params = list(items)
    except Exception as exc:  # not an interrupt: setup holds it, raised once setup is over
        return Raising(exc), "cpu"
    return params, devices(params)


class BucketLayout:
    """The layout half of :class:`~distconv.sync.mpi.sync.MPISync`, which sets what it reads
    (``params``, ``bucket_bytes``, ``stream``, ``_wire``, ``_pieces_asked``, ``_thread``,
    ``_grad_comm``, ...) and gives :meth:`_complete_check`."""

    params: list[Any]
    buckets: list[Bucket]
    firing_order: Sequence[str]
    _in_step: bool
    _thread: CommThread | None
    _slot: dict[str, Slot]
    _pump: PiecePump | None
    _used: UsedParams
    _complete_check: Callable[[], None]  # MPISync's: the step check, before the first piece
    lays_out_by_order = True  # the buckets: every rank told one order, else the check refuses

    def set_firing_order(self, names: Sequence[str]) -> None:
        """Use the Network's recorded firing order from the next step on (a tuple: a list changed
        in place would escape :meth:`start_step`'s identity test)."""
        self.firing_order = tuple(names)
        if self.params and not self._in_step:
            self._lay_out(self.firing_order)

    def _lay_out(self, order: Sequence[str], again: bool = False) -> None:
        """Rebuild the buckets in ``order`` (names not in it follow in reverse network order;
        frozen parameters have no place); ``again``: even where the order is unchanged."""
        self._laid_from = order
        params = layout_params(order, self.params)
        names = [p.name for p in params]
        if names == self._layout_order and not again:
            return
        spare = self._thread is not None  # it zeroes the used buffers while backward runs
        largest = max((p.grad.nbytes for p in params), default=0)  # in a bucket of its own
        widen = widening(params, self._wire)  # a wire wider than the gradients holds more
        sizes = piece_sizes(self._pieces_asked, spare, self.bucket_bytes, largest, widen)
        self.piece_sizes = sizes
        self.buckets = build_buckets(
            params, self.bucket_bytes, self._wire, self.world_size, spare, *sizes, self.stream
        )
        self._layout_order = names
        # the pump moves the pieces on as their gradients arrive: onto the wire, gradient by
        # gradient, or to the thread, a 16-bit bucket (reduced by hand) whole at its place
        thread = self._thread is not None
        plan = WirePlan(self.buckets, self.stream, whole=thread)
        self._slot, self._at_pack, self._owners = plan.slots, plan.at_pack, plan.owners
        self._used = UsedParams(self.comm, len(names), self.mpi.MAX if self.mpi else None)
        # piece k of the layout (a whole 16-bit bucket, or a piece of another) to the thread
        owners = plan.owners  # this layout's, should another replace it before a drain
        hand_off = (lambda k: self._thread.submit(*owners[k])) if thread else None
        self._pump = plan.pump(
            self._grad_comm, self._in_place, self._op, self._complete_check, hand_off
        )
        self._layout = {f"bucket {b.index}": b.describe() for b in self.buckets}
        self._layout_hash = int(digest(self._layout)[:15], 16)
