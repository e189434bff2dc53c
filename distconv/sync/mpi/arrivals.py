"""A step's backward half in :class:`~distconv.sync.mpi.MPISync`: each gradient counted into
its bucket as it fires, the complete buckets packed in layout order, and the pieces under them
moved on (onto the wire, or to the communication thread) while backward goes on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distconv.optim import mean_scale
from distconv.parameter import Parameter
from distconv.sync.mpi.buckets import Bucket
from distconv.sync.mpi.pieces import PiecePump, Slot, refusal
from distconv.sync.mpi.used import UsedParams


class Arrivals:
    """The arriving half of :class:`~distconv.sync.mpi.MPISync` (a mixin before its bases).

    It reads and sets what the sync sets up and each ``start_step`` resets: ``buckets``,
    ``_slot``, ``_stamp``, ``_in_step``, ``_used``, ``_recorded``, ``_first_pass``,
    ``_next_launch``, ``_total``, ``_at_pack``, ``_pump``, ``_grad_comm``, ``wire_bytes``, and
    calls the sync's ``_complete_check``.
    """

    buckets: list[Bucket]
    params: list[Parameter]
    step: int
    closed: bool
    _slot: dict[str, Slot]
    _stamp: int
    _in_step: bool
    _used: UsedParams
    _recorded: tuple[str, ...]
    _first_pass: list[str]
    _next_launch: int
    _total: int
    _examples: int  # this rank's in the step (SyncStrategy.start_step's)
    _at_pack: list[tuple[int, ...]]
    _pump: PiecePump | None
    _grad_comm: Any
    _in_place: Any
    _op: Any
    wire_bytes: int
    _complete_check: Callable[[], None]  # the sync's (annotated only: not shadowed here)

    def on_gradient(self, param: Parameter) -> None:
        """Count ``param`` in its bucket and move the wire on: a piece goes once everything
        under it has arrived, a complete bucket is packed (or handed to the thread) at once."""
        slot = self._slot.get(param.name)
        # the slot's own parameter, not one of its name: another model's (one rebuilt after
        # setup) would have had the set-up one's gradient summed, and trained nothing
        known = slot is not None and slot.bucket.params[slot.position] is param
        if not known or slot.stamp == self._stamp or not self._in_step:
            raise refusal(param, known, self._in_step, self.step, self.params, self.closed)
        slot.stamp = self._stamp
        self._used.fired[slot.index] = 1  # fired here (UsedParams: a bytearray, cheap)
        if not self._recorded:  # the first step's firing order, for the next layout
            self._first_pass.append(param.name)
        bucket = slot.bucket
        if param.grad is not bucket.views[slot.position]:  # replaced, not added to
            bucket.adopt(slot.position)
        bucket.pending -= 1
        if bucket.pending == 0:
            self._launch_ready()
        pump = self._pump  # the arrival, or a piece to move on: test the wire
        if pump is not None and (slot.covered or pump.request is not None):
            pump.arrive(slot.covered)

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
        bucket.examples = self._examples  # what a refused wire says of this rank's sums
        bucket.pack(mean_scale(self._total))
        self.wire_bytes += bucket.target.nbytes
        if self._at_pack[bucket.index]:
            self._pump.arrive(self._at_pack[bucket.index])

    def _reduce(self, bucket: Bucket, wait: Callable[[Any], None], piece: int | None) -> None:
        """On the communication thread: see :meth:`~.buckets.Bucket.reduce_on_thread`."""
        bucket.reduce_on_thread(self._grad_comm, wait, self._in_place, self._op, piece)
