"""Which parameters fired on any rank this step.

A parameter that no rank's backward reached (a branch no example took) has a zero gradient in
its bucket, but the optimizer must leave it alone: Momentum and Adam would still move it, and
Adam would count a step, where a single process (:class:`~distconv.sync.local.LocalSync`) never
calls the optimizer for it. A zero sum cannot tell "fired with a zero gradient" from "never
fired", so the ranks exchange one byte per parameter each step (PyTorch DDP's
``find_unused_parameters`` does the same). The exchange is posted by ``finish_step`` once it has
packed the last buckets (a rank that fails to says so in it: :meth:`UsedParams.fail`) and
travels beside the gradients' last pieces: by the main thread, or, where a communication thread
reduces the pieces, by that thread (only one thread may call MPI at a time).

It goes over the main communicator, never the gradients' own: which pieces are on the wire when
``finish_step`` begins depends on timing (and, for a parameter that fired on some ranks only,
on the rank), so on the gradients' communicator the ranks could start it in different places of
their sequences of collectives.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.notes import add_note
from distconv.sync.base import SyncError
from distconv.sync.mpi.held import HeldInterrupt
from distconv.sync.mpi.thread import CommThread

#: every flag of a rank that abandoned the step (a fired parameter's is 1): the OR (a max)
#: tells the ranks that finished it (see :meth:`UsedParams.abandoned`)
ABANDONED = 2
#: every flag of a rank whose ``finish_step`` failed to pack a bucket (:meth:`UsedParams.fail`)
FAILED = 3


class UsedParams:
    """One flag per parameter of the layout: set locally as gradients fire, then OR-ed over
    the ranks.

    The sync sets ``fired[index] = 1`` itself as each gradient fires (no method call on that
    path, which runs once per gradient): ``fired`` is the memory of ``local``, a bytearray,
    whose item store costs a third of a numpy array's (a 4 MB step of 100 gradients: 3 us).

    Attributes:
        fired: this rank's flags as a bytearray, set as gradients fire.
        local: the same flags as a numpy array (MPI's buffer, and every whole-array write).
        anywhere: the flags OR-ed over the ranks, once the exchange is complete.

    Args:
        comm: the communicator of the main thread's collectives.
        count: parameters in the layout (their :class:`~distconv.sync.mpi.pieces.Slot` indices).
        op: the reduction that ORs flags (``MPI.MAX``; None without MPI).
    """

    def __init__(self, comm: Any, count: int, op: Any) -> None:
        self.comm, self.op = comm, op
        self.fired = bytearray(count)  # never resized: local holds its memory
        self.local = np.frombuffer(self.fired, dtype=np.uint8)
        self.anywhere = np.zeros(count, dtype=np.uint8)
        self._request: Any = None
        self._thread: CommThread | None = None
        self._posted = self._owed = self._started = self._reached = False
        self._failed: BaseException | None = None  # this rank's error, said in its flags (fail)
        self._waited: Any = None  # with the thread, its wait for the flags, once queued
        #: the step's exchange was read and refused the step (a failed pack or abandon, said
        #: in every rank's flags alike): every rank raises, none waits in the step's collectives
        self.refused = False
        self._held = HeldInterrupt()

    def reset(self) -> None:
        """A new step: nothing has fired."""
        self.local.fill(0)
        self.refused = self._started = self._reached = False

    def post(
        self, thread: CommThread | None = None, kept: list[BaseException] | None = None
    ) -> None:
        """Start OR-ing the flags over the ranks, on ``thread`` where one reduces the pieces.

        Only started there, not waited for: a rank's thread blocks on each piece in turn, and
        a parameter that fired on some ranks only puts its piece before this exchange on one
        rank and after it on another; waiting here would have each thread wait for the other.

        A Ctrl-C as the start returns (or as the thread's call is queued) is held until its
        request is stored (or the call queued), then appended to ``kept`` where that is an
        empty list (``finish_step``'s, raised once the step's collectives are done:
        :func:`~.updates.reduce_all`), else raised: raised there before, it lost the exchange
        (or ended the step before its last pieces went), which the other ranks then waited in,
        and close aborted.
        """
        self._thread, self._waited, self._posted = thread, None, True
        try:
            with self._held:
                self._reached = True  # held: from here the start may be made
                if thread is None:
                    self._start()
                else:
                    # on every rank, even after its thread failed (a 16-bit wire refused):
                    # whether a rank's failing bucket came before or after this start in its
                    # queue depends on the rank, and :meth:`drop` completes it on every rank
                    # before a new layout
                    start = lambda wait: self._start()  # noqa: E731 - on the thread
                    thread.call(start, "start of the used-parameter flags", True)
                self._started = True  # held: recorded before any Ctrl-C is raised
        except KeyboardInterrupt as exc:  # started: this rank goes on with the others
            if kept is None or kept or not self._started:
                raise
            kept.append(exc)

    @property
    def started(self) -> bool:
        """Whether this step's exchange was started (:meth:`post`): made again, the start
        would be a collective on this rank alone."""
        return self._started

    @property
    def start_unknown(self) -> bool:
        """Whether :meth:`post` reached this step's start and did not record it: made or not,
        unknown (the start or the queueing raised). False where a Ctrl-C came before it
        (nothing made: post may be called again) or once it is recorded."""
        return self._reached and not self._started

    @property
    def pending(self) -> bool:
        """Whether the exchange is posted and not yet read (:meth:`complete`)."""
        return self._posted

    def fail(
        self, error: BaseException, world_size: int, said: BaseException | None = None
    ) -> None:
        """This rank's ``finish_step`` failed packing its last buckets (``error``, not a
        SyncError; a KeyboardInterrupt too), before it posted the flags. Among several ranks
        every flag says :data:`FAILED`, its pieces go as they are, and :meth:`complete` refuses
        the step on every rank, this one raising ``said`` (by default ``error``; a Ctrl-C kept
        since ``start_step``, ``error`` its context): no rank updates, none waits for pieces
        that never come, and every rank counts the step (a setup meets them all). Else ``said``
        is raised at once.
        """
        said = error if said is None else said
        if world_size == 1 or isinstance(error, SyncError):  # nobody waits; every rank's
            raise said
        self.local.fill(FAILED)
        self._failed = said

    def note_unsaid(self, error: BaseException) -> None:
        """``error`` ends ``finish_step`` before :meth:`complete` raised this rank's own failure
        (:meth:`fail`): a later bucket's refusal or the thread's failure, raised alike on every
        rank, or an interrupt (a Ctrl-C in a wait), goes on, with a note naming that failure
        (:func:`~distconv.notes.add_note`), which is not lost.

        Raises:
            BaseException: that failure itself, where it was an interrupt (a KeyboardInterrupt:
                not an Exception), ``error`` its context: what was asked is to stop.
        """
        failed = self._failed
        if failed is not None and not isinstance(failed, Exception):
            self._failed = None
            raise failed
        if failed is not None:
            add_note(error, f"this rank had failed to pack a bucket before: {failed!r}")

    def _start(self) -> None:
        self._request = self.comm.Iallreduce(self.local, self.anywhere, self.op)

    def complete(self) -> np.ndarray | None:
        """Wait for the exchange (call it once every piece is handed over); the flags of the
        parameters that fired on some rank, or None when every parameter did (the common
        case: nothing to skip).

        A call interrupted in its wait (a KeyboardInterrupt as the exchange's Wait returns, or,
        with the thread, in the wait for the thread's) or as it reads the flags leaves it
        :attr:`pending`, for the next call to read: that call waits for the same exchange (at
        once: it is complete), never queues a second wait, and reads the same flags. Once it
        stops pending (one store), nothing is left to do again: an interrupt there is raised.

        Raises:
            SyncError: the communication thread failed.
        """
        if not self._posted:
            return None
        self._wait()
        read = self._read()  # pending till read (kept.to_the_end makes the call again)
        # refused before the exchange is over: a Ctrl-C between the two, once it no longer
        # pends, is raised at once (updates.reduce_all), not taken for this rank's alone
        self.refused = isinstance(read, BaseException)
        self._done()
        if isinstance(read, BaseException):
            raise read
        return read

    def _wait(self) -> None:
        """Wait for the posted exchange (made again, at once: it is complete)."""
        if self._thread is None:
            self._request.Wait()
        else:  # on the thread too: while it reduces, it alone may call MPI
            if self._waited is None:  # queued once: a call made again waits for the same
                wait_flags = lambda wait: wait(self._request)  # noqa: E731 - started there
                self._waited = self._thread.call(wait_flags, "used-parameter flags")
            self._thread.finish(self._waited)

    def _done(self) -> None:
        """The exchange is over: nothing pending, nothing left to wait for or raise."""
        self._posted = False  # first: a request dropped while pending would be waited on again
        self._request = self._waited = self._failed = None

    def _read(self) -> np.ndarray | BaseException | None:
        """The completed exchange's outcome, read again alike: this rank's failed pack (its
        error: :meth:`fail`), another rank's (a SyncError to raise), the flags, or None."""
        if self._failed is not None:  # FAILED, every flag: the others refuse the step too
            return self._failed
        # one copy, then membership tests in C: on the step's path from the last wait to the
        # first update, where numpy's max and all (a microsecond each, several on a busy core
        # just after an MPI wait) were three. The flags are 0, 1, ABANDONED or FAILED, OR-ed by
        # a max, so "FAILED in" is "the max is FAILED", and so on down
        flags = self.anywhere.tobytes()
        if FAILED in flags:
            return SyncError(
                "another rank's finish_step failed (an error there, which it raised) before "
                "its last gradients went: no rank updated this step; set up again on every rank "
                "(a fit does), or close the sync (it ends the job)"
            )
        if ABANDONED in flags:
            return SyncError(
                "another rank abandoned the step (an error there) before it finished: its "
                "gradients never came, and the ranks count this step differently, which a "
                "second setup refuses: close the sync (it ends the job)"
            )
        return None if 0 not in flags else self.anywhere

    def drop(self) -> None:
        """Complete a started exchange, unread, on the calling thread, once the communication
        thread has stopped: a ``finish_step`` that failed on the thread (a 16-bit wire refused
        after the flags went) never completed it, and a new layout drops these buffers. One
        owed by an abandoned step (:meth:`abandoned`) is started first.

        A Ctrl-C as that start returns is held until it is recorded (its request stored, no
        longer owed), then raised once the exchange is complete: raised between, it lost the
        request, and the setup made again started the flags a second time, a collective on
        this rank alone that met another of the other ranks' (their setup's check)."""
        interrupt: KeyboardInterrupt | None = None
        if self._owed:
            self.local.fill(ABANDONED)
            try:
                with self._held:
                    self._start()
                    self._owed = False
            except KeyboardInterrupt as exc:
                if self._owed:  # came before the start: nothing started
                    raise
                interrupt = exc
        if self._request is not None:
            self._request.Wait()
        self._request, self._posted, self._owed, self._failed = None, False, False, None
        self._waited = None
        if interrupt is not None:
            raise interrupt

    def abandoned(self) -> None:
        """This rank abandoned a step whose check passed, before its ``finish_step`` started
        the flags: another rank may have finished the step and started them, and would wait
        for this rank's for ever (its setup's check, on the same communicator, met them
        instead). :meth:`drop` starts them, every flag :data:`ABANDONED`: such a rank's
        :meth:`complete` says so; where every rank abandoned, every rank starts them alike."""
        self._owed = True

    def drain(self) -> None:
        """Complete a posted exchange without looking at it (MPI must see it complete).

        Left pending, it belongs to a step this rank's ``finish_step`` already failed (a
        second Ctrl-C as the flags were waited for or read): what the flags say (another
        rank's failed or abandoned step, this rank's failed pack) was that step's to raise,
        and the rank raised its interrupt instead. Draining neither raises it nor, for it,
        has a close abort the job (:func:`~.clean_leave.leave`)."""
        if self._posted:
            self._wait()
            self._done()
