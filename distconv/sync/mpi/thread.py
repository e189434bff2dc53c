"""The communication thread: it reduces the buckets' pieces while backward goes on."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from distconv.sync.base import SyncError
from distconv.sync.mpi.buckets import Bucket
from distconv.sync.mpi.comm import POLL_SECONDS, WireRefused

#: how many times the sync's ``timeout`` the main thread lets the communication thread go
#: without moving on (starting something, or entering or leaving a request's wait): past the
#: watchdog's (which stops a ``Wait`` at ``timeout``), so a wait it watches is named by it, and
#: one it cannot see (a non-blocking start stuck on a broken link) is named here
PATIENCE = 1.5


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
        timeout: the sync's ``timeout``: once the thread has gone :data:`PATIENCE` times that
            without moving on, the main thread's wait for it raises (None: it waits for ever).
    """

    def __init__(
        self,
        reduce: Callable[[Bucket, Callable[[Any], None], int | None], None],
        poll_seconds: float = POLL_SECONDS,
        timeout: float | None = None,
    ) -> None:
        self._reduce, self.poll_seconds = reduce, poll_seconds
        self.patience = None if timeout is None else PATIENCE * timeout
        self.inside = ""  # what the thread is running now, for a wait that gives up
        self.moved = time.monotonic()  # when it last moved on (:meth:`_await`)
        #: the event of a wait an interrupt left, and when that wait began: the wait made again
        #: keeps its deadline (:meth:`_await`)
        self._interrupted: tuple[threading.Event, float] | None = None
        #: the settling an interrupt left unfinished, and when it began (:meth:`_report`)
        self._settling: tuple[threading.Event, float] | None = None
        self.hurry = threading.Event()
        #: the thread's first failure: every reduction after it is skipped, its bucket failed
        self.error: BaseException | None = None
        self.failed = ""  # what raised it, for the message
        #: whether :meth:`finish` or :meth:`wait` raised it to the main thread: a close after
        #: that is quiet, a close before it says it (:func:`~.clean_leave.leave`)
        self.reported = False
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._stopping = False
        self._stop_began = 0.0  # when the first stop began: every stop waits to its deadline
        self._ended = threading.Event()  # set once the thread has run its last item
        self._thread = threading.Thread(target=self._run, name="distconv-allreduce", daemon=True)
        self._thread.start()

    def submit(self, bucket: Bucket, piece: int | None = None) -> None:
        """Queue ``bucket``'s reduction, or (``piece``) that of one of its pieces: the bucket
        is done after its last piece, so its pieces must all come, in order."""
        if not piece:  # the whole bucket, or its first piece: not done, the main thread knows
            bucket.done.clear()  # (it waits for a bucket only after handing every piece over)
            bucket.error = None
        self._queue.put((bucket, piece))

    def zero(self, array: np.ndarray) -> None:
        """Queue the zeroing of ``array`` (done before any reduction submitted later)."""
        self._queue.put(array)

    def call(
        self, work: Callable[[Callable[[Any], None]], None], what: str, always: bool = False
    ) -> threading.Event:
        """Queue ``work(wait)``, a collective of its own (``what``, for messages), after what is
        queued: while the thread reduces, it alone may call MPI (``MPI_THREAD_SERIALIZED``).
        Returns the event set once ``work`` is done or skipped (after a failure: see
        :meth:`finish`). ``always``: done after a failure too, for the start of a collective on
        another communicator that every rank starts once a step, wherever its thread failed."""
        done = threading.Event()
        self._queue.put(_Call(work, what, done, always))
        return done

    def finish(self, done: threading.Event) -> None:
        """Block until a :meth:`call` is done, at full speed.

        Raises:
            SyncError: the thread failed (the call was then skipped), or is still inside
                something after :attr:`patience` seconds (:meth:`_await`).
        """
        self.hurry.set()
        self._await(done, "the communication thread's call")
        if self.error is not None:
            self._report(self.error)

    def failure(self) -> str:
        """What failed on the thread, and how (after :attr:`error` is set): a 16-bit wire's
        :class:`~distconv.sync.mpi.comm.WireRefused` is the bucket refused, not a failed
        transport (raised as the refusal itself: :meth:`_report`)."""
        how = "refused" if isinstance(self.error, WireRefused) else "failed"
        return f"{self.failed} {how} on the communication thread: {self.error}"

    @property
    def refused_alike(self) -> bool:
        """Whether the thread's failure is a 16-bit wire's refusal (``WireRefused``): every
        rank's thread refused the same bucket (the ranks hold the same bits) and skipped the
        same work after it, so a close after a step that ended alike may leave
        (:func:`~.clean_leave.why_not_leave`) once it has completed the flags' exchange, whose
        start (``always``) every rank's thread made. Raised on the main thread or not: where a
        device bucket's refusal (the main thread's) ended the step first, a later host bucket's
        on the thread is never reported, and close aborted the job."""
        return isinstance(self.error, WireRefused)

    def _run(self) -> None:
        try:
            self._serve()
        finally:
            self._ended.set()

    def _serve(self) -> None:
        while (item := self._queue.get()) is not None:
            if isinstance(item, _Call):
                self._call(item)
                continue
            if not isinstance(item, tuple):
                self._zero(item)
                continue
            bucket, piece = item
            try:
                # after a failure, no collective at all: this rank's sequence no longer matches
                # the other ranks', and a reduction out of step could sum the wrong buffers
                if self.error is None:
                    self._enter(f"the allreduce of gradient bucket {bucket.index}")
                    self._reduce(bucket, self._wait_request, piece)
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread by wait()
                what = f"gradient bucket {bucket.index}"
                self.error = exc
                self.failed = what if isinstance(exc, WireRefused) else f"allreduce of {what}"
            finally:
                self.inside = ""
                if self.error is not None:
                    bucket.error = self.error
                if bucket.ends_with(piece):
                    bucket.done.set()

    def _zero(self, array: np.ndarray) -> None:
        try:
            array.fill(0)  # numpy lets the GIL go while it writes
        except BaseException as exc:  # noqa: BLE001 - as a reduction's: skips all after it
            if self.error is None:  # the first failure is the one said (and maybe reported)
                self.error, self.failed = exc, "zeroing a used gradient buffer"

    def _call(self, call: _Call) -> None:
        try:
            if self.error is None or call.always:  # else no collective after a failure (_run)
                self._enter(f"the {call.what}" if call.what else "a call")
                call.work(self._wait_request)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread by finish()
            if self.error is None:  # an ``always`` call after a failure: the first is said
                self.error, self.failed = exc, call.what
        finally:
            self.inside = ""
            call.done.set()

    def _enter(self, inside: str) -> None:
        self.inside, self.moved = inside, time.monotonic()

    def _wait_request(self, request: Any) -> None:
        # a request's wait is the watchdog's to bound (from where it starts, as :meth:`_await`)
        self.moved = time.monotonic()
        poll(request, self.hurry, self.poll_seconds)
        self.moved = time.monotonic()

    def relax(self) -> None:
        """Backward starts: poll gently again."""
        self.hurry.clear()

    def wait(self, bucket: Bucket) -> None:
        """Block until ``bucket`` is reduced (and make the thread finish at full speed).

        Raises:
            SyncError: the reduction failed on the communication thread, or the thread is
                still inside something after :attr:`patience` seconds (:meth:`_await`).
        """
        self.hurry.set()
        self._await(bucket.done, f"gradient bucket {bucket.index}")
        if bucket.error is not None:  # the thread's first failure, maybe another bucket's
            self._report(bucket.error)

    def _report(self, error: BaseException) -> NoReturn:
        """Raise the thread's failure on the main thread, once the thread has run what was
        queued before: an ``always`` call queued after the failure (the flags' start) still
        calls MPI there, and the main thread, told of the failure, may call MPI at once (close's
        abort), two threads in MPI under ``MPI_THREAD_SERIALIZED``. After a failure every
        queued reduction is skipped and an ``always`` call only starts a request: quick.

        A report made again after a Ctrl-C kept in that wait (:func:`~.kept.to_the_end`
        makes the bucket's or the flags' wait again, and so the report) waits for the same
        settling from its start, as :meth:`_await` does for a wait made again (which it cannot
        tell here: the bucket's wait comes between). A new settling, its patience counted
        afresh, named a thread stuck in the flags' start after up to twice as long."""
        if not self._stopping:  # a stopped thread runs nothing more
            if self._settling is None:
                settled = threading.Event()
                self._queue.put(_Call(lambda wait: None, "", settled, False))
                self._settling = (settled, time.monotonic())
            settled, began = self._settling
            self._settling = None
            try:
                self._await(settled, "the communication thread to settle", self.failure(), began)
            except KeyboardInterrupt:  # kept, the report made again: this settling, its deadline
                self._settling = (settled, began)
                raise
        self.reported = True
        if isinstance(error, WireRefused):  # raised alike, as without the thread (its words)
            raise WireRefused(str(error)) from error
        raise SyncError(self.failure()) from error

    def _await(
        self, event: threading.Event, what: str, failed: str = "", began: float | None = None
    ) -> None:
        """Wait for ``event`` (set by the thread) until the thread has gone :attr:`patience`
        seconds without moving on, counted from this wait's start at the earliest: ``began``
        if given (a wait its caller made before), else the start of the wait an interrupt
        left, where this one waits for the same event next (a Ctrl-C kept and the wait made
        again: :func:`~.kept.to_the_end`), else the patience began anew there and a stuck
        thread was named after up to twice as long.

        Not :attr:`patience` in all: the event may come behind several live collectives (the
        flags behind every bucket still on the wire, a 16-bit bucket's two), each of which
        may take up to the watchdog's ``timeout``.

        Raises:
            SyncError: the thread is still inside something (a collective's start, which the
                watchdog does not watch, stuck on a broken link), named with ``failed`` (the
                thread's earlier failure) if any; the rank must abort (close does).
        """
        left, self._interrupted = self._interrupted, None
        if began is None:
            began = left[1] if left is not None and left[0] is event else time.monotonic()
        try:
            while not event.wait(self._patience_left(began)):
                if self._patience_left(began) <= 0:
                    before = f"{failed}; " if failed else ""
                    raise SyncError(
                        f"{before}waited for {what}: the communication thread is still inside "
                        f"{self.inside or 'nothing it named'}, {self.patience:g} s without "
                        "moving on (another rank never joined it, or a link is broken); close "
                        "the sync (it ends the job)"
                    )
        except KeyboardInterrupt:  # a Ctrl-C in the wait: made again, it keeps this deadline
            self._interrupted = (event, began)
            raise

    def _patience_left(self, began: float) -> float | None:
        """Seconds before the thread, quiet since it last moved on (or since ``began``), has
        used up :attr:`patience` (None: no bound)."""
        if self.patience is None:
            return None
        return self.patience - (time.monotonic() - max(began, self.moved))

    def stop(self, timeout: float | None = None) -> None:
        """Let the thread finish what is queued, then end it (again, once it has ended: nothing
        to do).

        A stop made again while the thread has not ended (the first was cut short by a Ctrl-C,
        or gave up: a second setup stops the thread it kept) waits on, to the first stop's
        deadline, and names a thread that has not moved on since at once: it returned at once,
        and the caller, told the thread had stopped, called MPI beside it.

        Args:
            timeout: seconds to wait; None (the sync's stops): as :meth:`wait` waits, from the
                first stop's start, not a fixed time, since what is queued may wait for a rank
                that is late but alive (a setup's drained pieces wait for the rank still in the
                abandoned step).

        Raises:
            SyncError: the thread is still inside something after ``timeout`` seconds, or
                (None) after :attr:`patience` seconds without moving on (:meth:`_await`):
                another rank never joined a reduction; MPI must not be called from this
                thread meanwhile.
        """
        if not self._stopping:
            self._stopping, self._stop_began = True, time.monotonic()
            self.hurry.set()  # nothing left to overlap
            self._queue.put(None)
        if timeout is None:
            self._await(self._ended, "the communication thread to stop", began=self._stop_began)
        elif not self._ended.wait(timeout):
            raise SyncError(
                f"the communication thread did not stop within {timeout:g} s: a reduction "
                "still waits for another rank"
            )
        self._thread.join()


class _Call:
    """A queued :meth:`CommThread.call`: the work, what it is, and the event that says it is
    over."""

    __slots__ = ("always", "done", "what", "work")

    def __init__(
        self, work: Callable[[Any], None], what: str, done: threading.Event, always: bool
    ) -> None:
        self.work, self.what, self.done, self.always = work, what, done, always
