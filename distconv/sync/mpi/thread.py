"""The communication thread: it reduces the buckets' pieces while backward goes on."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from distconv.sync.base import SyncError
from distconv.sync.mpi.buckets import Bucket
from distconv.sync.mpi.comm import POLL_SECONDS


def poll(request: Any, hurry: threading.Event | None = None, seconds: float = POLL_SECONDS) -> None:
    """Wait for an MPI request by testing it between sleeps of ``seconds``, until told to hurry.

    ``MPI_Wait`` spins on a core; while backward computes there, a sleep gives the core (and the
    GIL) back to it, and each ``Test`` still drives MPICH's progress engine. Once ``hurry`` is
    set (the main thread waits for the result, so nothing is left to overlap) ``Wait`` finishes
    at full speed. ``seconds=0`` waits in ``MPI_Wait`` from the start (mpi4py lets the GIL go
    there), for a core of its own: sleeping polls slow a reduction down several times.
    """
    if seconds <= 0:
        request.Wait()
        return
    while not request.Test():
        if hurry is None:
            time.sleep(seconds)
        elif hurry.is_set() or hurry.wait(seconds):  # told to hurry while asleep: wake now
            request.Wait()
            return


class Settle:
    """A request the communication thread drives to completion for the main thread, which
    would otherwise meet the other ranks in ``MPI_Wait`` when it needs the result: the step
    check, posted when a step starts, whose result the first piece needs (see
    :meth:`CommThread.settle`)."""

    __slots__ = ("done", "error", "request")

    def __init__(self, request: Any) -> None:
        self.request, self.done, self.error = request, threading.Event(), None

    def run(self, wait: Callable[[Any], None]) -> None:
        """On the thread: wait for the request (``wait``), then tell the main thread."""
        try:
            wait(self.request)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread by wait()
            self.error = exc
        finally:
            self.done.set()

    def wait(self) -> None:
        """Block until the thread has completed the request (at once, mostly: it had the
        forward pass and the first gradients' time to do so).

        Raises:
            SyncError: completing it failed on the thread.
        """
        self.done.wait()
        if self.error is not None:
            raise SyncError(f"the step check failed: {self.error}") from self.error


class CommThread:
    """One thread that runs the buckets' reductions in the order they are submitted: whole
    buckets, or pieces of them handed over one by one as their gradients arrive.

    MPI needs collectives issued in the same order on every rank; one thread fed in layout
    order keeps it. It owns a duplicate communicator, so the main thread's collectives (the
    per-step check, metrics) never interleave with its own.

    Args:
        reduce: the reduction of one packed bucket (piece None) or of one of its pieces, given
            how to wait for each request.
        poll_seconds: how each request is waited for while backward runs (see :func:`poll`).
        last: the layout's last piece, which the main thread reduces beside this thread
            (:class:`LastPiece`), or None: this thread reduces every piece.
    """

    def __init__(
        self,
        reduce: Callable[[Bucket, Callable[[Any], None], int | None], None],
        poll_seconds: float = POLL_SECONDS,
        last: LastPiece | None = None,
    ) -> None:
        self._reduce, self.poll_seconds, self.last = reduce, poll_seconds, last
        self.hurry = threading.Event()
        #: the thread's first failure: every reduction after it is skipped, its bucket failed
        self.error: BaseException | None = None
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="distconv-allreduce", daemon=True)
        self._thread.start()

    def submit(self, bucket: Bucket, piece: int | None = None) -> None:
        """Queue ``bucket``'s reduction, or (``piece``) that of one of its pieces: the bucket
        is done after its last piece, so its pieces must all come, in order."""
        if not piece:  # the whole bucket, or its first piece: not done, the main thread knows
            bucket.done.clear()  # (it waits for a bucket only after handing every piece over)
            bucket.error = None
        self._queue.put((bucket, piece))

    def hand_over(self, k: int, bucket: Bucket, piece: int | None) -> None:
        """Piece ``k`` of the layout (``bucket``'s ``piece``) to this thread's queue, or, the
        layout's :class:`LastPiece`, onto the wire from the calling (main) thread at once;
        not after a failure (no collective then, as on the thread)."""
        last = self.last
        if last is None or k != last.index:
            self.submit(bucket, piece)
        elif self.error is None:
            last.start(bucket)

    def place_last(self, owners: Sequence[tuple[Bucket, int | None]]) -> None:
        """A new layout: see :meth:`LastPiece.place`."""
        if self.last is not None:
            self.last.place(owners)

    def settle(self, request: Any) -> Settle:
        """Queue driving ``request`` (a collective the main thread posted on another
        communicator) to completion, as gently as a piece (:func:`poll`). Until the returned
        :class:`Settle` is done, the main thread must not touch the request."""
        item = Settle(request)
        self._queue.put(item)
        return item

    def zero(self, array: np.ndarray) -> None:
        """Queue the zeroing of ``array`` (done before any reduction submitted later)."""
        self._queue.put(array)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if isinstance(item, Settle):
                item.run(self._wait_request)
                continue
            if not isinstance(item, tuple):
                item.fill(0)  # numpy lets the GIL go while it writes
                continue
            bucket, piece = item
            try:
                # after a failure, no collective at all: this rank's sequence no longer matches
                # the other ranks', and a reduction out of step could sum the wrong buffers
                if self.error is None:
                    self._reduce(bucket, self._wait_request, piece)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread by wait()
                self.error = exc
            finally:
                if self.error is not None:
                    bucket.error = self.error
                if bucket.ends_with(piece):
                    bucket.done.set()

    def _wait_request(self, request: Any) -> None:
        poll(request, self.hurry, self.poll_seconds)

    def relax(self) -> None:
        """Backward starts: poll gently again."""
        self.hurry.clear()

    def wait(self, bucket: Bucket) -> None:
        """Block until ``bucket`` is reduced (and make the thread finish at full speed), its
        last piece too where the calling (main) thread posted it (:class:`LastPiece`): that
        one last, as the thread's waiting moves it on too (MPI's progress is global), so that
        one thread a rank spins in MPI at a time (two, on 2 ranks x 2 cores, slow each other).

        Raises:
            SyncError: the reduction failed on the communication thread.
        """
        self.hurry.set()
        bucket.done.wait()
        if bucket.error is not None:
            raise SyncError(
                f"allreduce of gradient bucket {bucket.index} failed: {bucket.error}"
            ) from bucket.error
        if bucket.last_on_main and self.last is not None:
            self.last.wait()

    def stop(self) -> None:
        """Let the thread finish what is queued, then end it; free the last piece's
        communicator."""
        self._queue.put(None)
        self._thread.join(timeout=30)
        if self.last is not None:
            self.last.free()
            self.last = None


class LastPiece:
    """The layout's last piece, reduced by the main thread beside the communication thread.

    That piece starts after the last gradient, so no backward hides it. Handed to the thread, it
    also waits for the piece before it, and then the main thread waits for the thread to wake
    it (0.1-0.25 ms on a 2-core VM). Posted by the main thread at once on a communicator of its
    own, it travels beside the piece before it; the main thread waits for it in ``MPI_Wait``
    (no wake-up) once the thread is done (see :meth:`CommThread.wait`). Two threads in MPI at
    once need
    ``MPI_THREAD_MULTIPLE``: :meth:`beside` returns None unless every rank has it (then every
    rank reduces every piece on the thread). Which thread posts which piece is fixed by the
    layout, never by timing, so results stay bitwise the same from run to run.

    Args:
        comm: a communicator of its own (the gradient communicator's collectives run on the
            thread in an order this piece must not disturb).
        in_place: ``MPI.IN_PLACE`` (None without MPI).
        op: ``MPI.SUM`` (None without MPI).

    Attributes:
        index: the layout's last piece, where the main thread reduces it; None where it cannot.
    """

    def __init__(self, comm: Any, in_place: Any, op: Any) -> None:
        self.comm, self.in_place, self.op = comm, in_place, op
        self.index: int | None = None
        self.request: Any = None

    @classmethod
    def beside(cls, comm: Any, mpi: Any, in_place: Any, op: Any) -> LastPiece | None:
        """A :class:`LastPiece` on a duplicate of ``comm`` where every rank may call MPI from
        two threads at once, else None. A collective: every rank calls it."""
        multiple = mpi is None or mpi.Query_thread() >= mpi.THREAD_MULTIPLE
        without = np.array([0.0 if multiple else 1.0])
        comm.Allreduce(in_place, without, op)
        return cls(comm.Dup(), in_place, op) if without[0] == 0 else None

    def place(self, owners: Sequence[tuple[Bucket, int | None]]) -> None:
        """Take the last of a layout's pieces (per piece, its bucket and index in it, as
        :class:`~distconv.sync.mpi.pieces.WirePlan` lists them) where that is a piece of a
        bucket that :attr:`~Bucket.streams` (its reduction is its own unpacking) and not the
        bucket's only one (the thread reduces the rest, then marks the bucket done)."""
        self.index = None
        if owners:
            bucket, j = owners[-1]
            if j is not None and j >= 1 and bucket.streams:
                self.index = len(owners) - 1
                bucket.last_on_main = True

    def start(self, bucket: Bucket) -> None:
        """Post the reduction of ``bucket``'s last piece."""
        piece = bucket.target[bucket.pieces[-1]]
        self.request = self.comm.Iallreduce(self.in_place, piece, self.op)

    def wait(self) -> None:
        """Wait for the piece posted this step, if any."""
        request, self.request = self.request, None
        if request is not None:
            request.Wait()

    def free(self) -> None:
        """Free the communicator (after the last :meth:`wait`)."""
        self.comm.Free()
