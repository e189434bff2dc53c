"""A hang breaker: a rank that waits too long for the others in MPI stops the whole job.

MPI has no timeouts. A collective that some rank never joins waits forever: a rank stuck (a
deadlock, a hung file system), a node lost in a way the MPI library does not notice, or ranks
that wait in different collectives outside the sync's own exchanges, which name ranks at
different steps, meetings or setup (a collective of the caller's own on the sync's
communicator: MPI matches collectives by their order alone). PyTorch's watchdog over NCCL and
Horovod's stall check answer it the same way, and so does this module: every blocking MPI call
a sync makes (a blocking collective, or the ``Wait`` of a non-blocking one) is watched; one that
lasts ``timeout`` seconds stops the job with a message naming the call, its communicator, the
sync's phase (setup, step N, after step N, close) and this rank, on stderr and in the log.
Half-way (a minute at most) a warning says the same, while there is still time to look.

The watching costs three dictionary operations per blocking call (and a small request object per
non-blocking one), and a thread that wakes once a second. The stop is ``MPI_Abort`` from the
watchdog's thread, which the waiting thread cannot do itself; where MPI was initialised below
``MPI_THREAD_MULTIPLE`` that call is not allowed from a second thread, so the process kills
itself instead (:func:`end_process`), and ``mpiexec`` (MPICH's Hydra and Open MPI's alike;
Slurm's ``srun`` only with ``--kill-on-bad-exit``) then ends the others. Should ``MPI_Abort``
itself hang or raise, or the printing of the stop block, the process still ends within
:data:`~distconv.sync.mpi.leaving.ABORT_GRACE` seconds. The watchdog's thread never runs a log
handler (one may block, on a stderr pipe nobody reads or a dead collector, or raise): its
records are written by a thread of their own (:class:`LogWriter`), and the stop waits for its
own at most :data:`~distconv.sync.mpi.leaving.ABORT_GRACE` seconds.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from distconv.rank_endings import ENDING_THIS_RANK
from distconv.shard_timeout import exact_text
from distconv.sync.base import SyncError
from distconv.sync.mpi import leaving
from distconv.sync.mpi.comm import checked_seconds
from distconv.sync.mpi.leaving import abort_job, end_process, last_resort, let_forward, reason

log = logging.getLogger("distconv.sync.mpi")

#: seconds a blocking MPI call may wait for the other ranks before the job is stopped: long
#: against any wait a healthy job has (every rank waits while rank 0 writes a checkpoint),
#: short against an operator noticing a silent hang; PyTorch's NCCL watchdog waits as long
DEFAULT_TIMEOUT = 600.0
#: the least timeout whose stop is worded as a stall; below it, as the setting's (ranks that
#: are well wait that long for each other, as they start). The least a parameter-server shard
#: takes (``distconv.sync.ps.config.MIN_TIMEOUT``), so one --timeout is too short under both
SHORTEST_TIMEOUT = 0.2
#: the warning comes half-way through the timeout, but never later than this
WARN_AFTER = 60.0
#: the blocking collectives the syncs call; ``Dup`` is one too (see :meth:`WatchedComm.duplicate`)
BLOCKING = ("Allreduce", "Allgather", "Allgatherv", "Bcast", "Barrier", "Split_type")
#: the non-blocking ones, whose request's ``Wait`` is watched
NON_BLOCKING = ("Iallreduce", "Iallgather", "Ialltoall", "Ireduce_scatter_block", "Ibcast")


def check_timeout(value: float | None) -> float | None:
    """``value`` as a float if it is a positive finite number (not a bool); None as it is."""
    value = checked_seconds(value, lambda v: v > 0, "timeout must be a positive number of seconds")
    return None if value is None else float(value)


class LogWriter:
    """Writes log records on a daemon thread of its own, so that the thread that says them
    never runs a log handler: one that blocks (a stream on a stderr pipe nobody reads, a
    handler sending to a dead collector) or raises would stop it, and a hang breaker must not
    stop. Records are written in the order they were said.

    Args:
        logger: the logger the records go to.
        name: the thread's name.
    """

    def __init__(self, logger: logging.Logger, name: str) -> None:
        self._logger = logger
        self._queue: queue.SimpleQueue[tuple[logging.LogRecord, threading.Event] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._write, name=name, daemon=True)
        self._thread.start()

    def say(self, level: int, message: str, *args: Any, exc_info: Any = None) -> threading.Event:
        """Queue ``logger.log(level, message, *args, exc_info=exc_info)`` (``exc_info``: an
        exception tuple, taken where it was caught); never blocks. The record is made here, so
        it names the thread and the function that said it, not the writer. Returns an event
        set once the record was written, or its handler raised (at once where the level is
        off)."""
        done = threading.Event()
        if not self._logger.isEnabledFor(level):
            done.set()
            return done
        # the caller's own frame, not Logger.findCaller: its frame counting is the
        # interpreter's (3.10 starts from logging's _log, so it named threading's run)
        code, line = (caller := sys._getframe(1)).f_code, caller.f_lineno
        record = self._logger.makeRecord(
            self._logger.name, level, code.co_filename, line, message, args, exc_info, code.co_name
        )
        self._queue.put((record, done))
        return done

    def close(self) -> None:
        """End the thread once what was said before is written (or never, behind a handler
        that blocks: it is a daemon)."""
        self._queue.put(None)

    def _write(self) -> None:
        while (said := self._queue.get()) is not None:
            record, done = said
            try:
                self._logger.handle(record)
            except Exception:  # noqa: BLE001 - a handler that raises loses this record only
                _say_handler_failed(record)
            finally:
                done.set()


def _say_handler_failed(record: logging.LogRecord) -> None:
    """Say on stderr, as ``logging.Handler.handleError`` says its own handlers' errors (unless
    ``logging.raiseExceptions`` is off), that a handler raised on ``record`` (the exception
    being handled): the record is lost, and no ``emit`` of the handler's own named why."""
    if not logging.raiseExceptions:
        return
    try:
        sys.stderr.write(
            "--- Logging error (a record of the MPI watchdog) ---\n"
            f"{traceback.format_exc()}Message: {record.msg!r}\nArguments: {record.args!r}\n"
        )
    except Exception:  # noqa: BLE001 - no stderr (closed, None): nowhere left to say it
        pass


class Watchdog:
    """Watches the blocking MPI calls of every thread; stops the job when one lasts too long.

    Args:
        timeout: seconds a call may wait; None: watch nothing (no thread, nothing is stopped).
        stop_job: called once, from the watchdog's thread, with the message naming the stalled
            call; it must not return (see :func:`abort_on_stall`).
        rank: this rank, for the messages.

    Attributes:
        phase: what the sync is doing (``"setup"``, ``"step 3"``, ``"after step 3"``,
            ``"close"``), set by the sync, recorded with each call.
    """

    def __init__(self, timeout: float | None, stop_job: Callable[[str], None], rank: int) -> None:
        self.timeout, self.rank = timeout, rank
        self.phase = "setup"
        self._stop_job = stop_job
        #: per thread, the call it is inside: (what, phase, since); one entry per thread, so
        #: the main thread and the communication thread never overwrite each other's
        self._waits: dict[int, tuple[str, str, float]] = {}
        self._closing = threading.Event()
        if timeout is None:  # watches nothing: a sync of one rank, or one told to wait for ever
            return
        self.warn_after = min(WARN_AFTER, timeout / 2)
        self._tick = min(1.0, max(0.01, timeout / 10))  # no spinning on a tiny timeout
        self._writer = LogWriter(log, "distconv-watchdog-log")  # ended by _watch, as it ends
        self._thread = threading.Thread(target=self._watch, name="distconv-watchdog", daemon=True)
        try:
            self._thread.start()
        except BaseException:
            self._writer.close()
            raise

    def enter(self, what: str) -> None:
        """The calling thread starts a blocking call (``what``, for the messages)."""
        self._waits[threading.get_ident()] = (what, self.phase, time.monotonic())

    def leave(self) -> None:
        """The calling thread's blocking call returned (or raised)."""
        self._waits.pop(threading.get_ident(), None)

    def call(self, what: str, call: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)``, watched as ``what`` (both positional only: every keyword
        is the call's own, ``what`` and ``call`` too): the calling thread's entry is gone
        however the call is left, a Ctrl-C raised in its sign-off included (a SIGINT's handler
        runs between any two steps of the main thread: one raised before the pop, with no wait
        made again, left an entry that had the watchdog stop the job for a stall in a call long
        over, where the rank went on without another watched call for the timeout)."""
        waits, ident = self._waits, threading.get_ident()
        try:
            try:
                waits[ident] = (what, self.phase, time.monotonic())
                return call(*args, **kwargs)
            finally:
                waits.pop(ident, None)
        finally:  # the sign-off above interrupted before its pop: the pop, again
            waits.pop(ident, None)

    def close(self) -> None:
        """Stop watching (the thread ends within a tick)."""
        self._closing.set()

    def _watch(self) -> None:
        try:
            self._watch_calls()
        finally:  # the only thread that says anything: nothing more to write
            self._writer.close()

    def _watch_calls(self) -> None:
        warned: set[float] = set()  # the start times of the calls warned about
        said_failure = False
        while not self._closing.wait(self._tick):
            try:
                stalled = self._look(warned)
            except Exception:  # a dead watchdog would watch nothing: say so once, go on (a look
                # that fails every time still watches nothing, but one that fails once does)
                if not said_failure:
                    said = "rank %d: the MPI watchdog's look failed; it goes on"
                    self._writer.say(logging.ERROR, said, self.rank, exc_info=sys.exc_info())
                said_failure = True
                continue
            if stalled is not None:
                self._closing.set()
                try:
                    self._say_stopping(stalled)
                finally:
                    self._stop_job(stalled)
                return

    def _say_stopping(self, stalled: str) -> None:
        """Log the stop and wait until it is out, :data:`~.leaving.ABORT_GRACE` seconds at
        most: a handler that blocks (a stderr pipe nobody reads, a dead collector) must not
        keep the hang breaker from its stop, and one that returns has its record out first."""
        said = "rank %d%s%s; stopping the job"
        stalled_by = (self.rank, self._after_rank, stalled)
        self._writer.say(logging.ERROR, said, *stalled_by).wait(leaving.ABORT_GRACE)

    def _look(self, warned: set[float]) -> str | None:
        """Warn about the calls past the warning point; the message of one past the timeout."""
        now = time.monotonic()
        waits = self._waits.copy()  # one C call: no other thread changes it meanwhile
        warned.intersection_update(since for _, _, since in waits.values())  # forget the ended
        for what, phase, since in waits.values():
            waited = now - since
            if waited >= self.timeout:
                return self.stalled(what, phase, waited)
            if waited >= self.warn_after and since not in warned:
                warned.add(since)  # warned once per call
                said = self.stalled(what, phase, waited)
                warning = "rank %d%s%s; the job stops at %g s"
                stalled_by = (self.rank, self._after_rank, said, self.timeout)
                self._writer.say(logging.WARNING, warning, *stalled_by)
        return None

    @property
    def _after_rank(self) -> str:
        """What the log lines put between ``rank N`` and :meth:`stalled`'s message: ``rank 0
        waited ...``, but ``rank 0: --timeout ...`` where the message leads with the setting."""
        return " " if too_short(self.timeout) is None else ": "

    def stalled(self, what: str, phase: str, waited: float) -> str:
        """The message for a call that has waited ``waited`` seconds: the setting first where
        the timeout is below :data:`SHORTEST_TIMEOUT` (:func:`too_short`)."""
        waited_for = f"waited {waited:.1f} s in {what} ({phase})"
        if (short := too_short(self.timeout)) is not None:
            return f"{short} (it {waited_for})"
        return (
            f"{waited_for} for a rank that has not joined it: a rank is stuck, or died without "
            "MPI noticing, or the ranks wait in different collectives (one of the caller's own "
            "on the sync's communicator?) "
            f"(timeout {self.timeout:g} s, --timeout or MPISync's timeout=)"
        )


def too_short(timeout: float | None) -> str | None:
    """Why ``timeout`` is the cause of any stop it makes, where it is below
    :data:`SHORTEST_TIMEOUT`; None otherwise. ``-- --timeout 0.001`` stopped every job at
    setup in the words of a stall, "for a rank that has not joined it: a rank is stuck, or
    died", with the setting last, in a parenthesis: a wait that short runs out between ranks
    that are well. No least is offered as the way out: a job of two ranks on one host, whose
    rank 0 writes its last checkpoint at close, stopped there at 0.2 s and at 1 s all the same,
    in a stall's words."""
    if timeout is None or timeout >= SHORTEST_TIMEOUT:
        return None
    return (
        f"--timeout {exact_text(timeout)} s (or MPISync's timeout=) is too short for MPI: "
        "ranks that are well wait longer than that for each other, at setup and while rank 0 "
        f"writes a checkpoint; give one longer than those waits ({DEFAULT_TIMEOUT:g} s by "
        "default)"
    )


class WatchedRequest:
    """A non-blocking collective's request whose ``Wait`` is watched; ``Test`` is the request's
    own (called at every gradient while a piece is on the wire: no extra Python call)."""

    __slots__ = ("Test", "_request", "_watchdog", "_what")

    def __init__(self, request: Any, watchdog: Watchdog, what: str) -> None:
        self._request, self._watchdog, self._what = request, watchdog, what
        self.Test = request.Test

    def Wait(self) -> None:  # noqa: N802 - mpi4py's spelling
        """Wait for the request, watched."""
        self._watchdog.call(self._what, self._request.Wait)


class WatchedComm:
    """An mpi4py communicator whose blocking calls the :class:`Watchdog` watches.

    The collectives in :data:`BLOCKING` and :data:`NON_BLOCKING` are wrapped (each looked up
    once, then cached on the instance); every other attribute is the communicator's own.

    Args:
        comm: the communicator.
        watchdog: the watchdog.
        name: what the messages call the communicator (``"job"``, ``"gradients"``).
    """

    def __init__(self, comm: Any, watchdog: Watchdog, name: str) -> None:
        self.comm, self.watchdog, self.name = comm, watchdog, name

    def __getattr__(self, name: str) -> Any:
        if name == "comm":  # not set yet (a copy under construction): not the wrapped one's
            raise AttributeError(name)
        attr = getattr(self.comm, name)
        if name in BLOCKING:
            attr = self._blocking(name, attr)
        elif name in NON_BLOCKING:
            attr = self._non_blocking(name, attr)
        else:
            return attr  # the communicator's own, looked up each time (a count may change)
        self.__dict__[name] = attr  # wrapped once, then found here, not through __getattr__
        return attr

    def _blocking(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        what, watchdog = f"{name} on the {self.name} communicator", self.watchdog

        def watched(*args: Any, **kwargs: Any) -> Any:
            return watchdog.call(what, call, *args, **kwargs)

        return watched

    def _non_blocking(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        what = f"the Wait of an {name} on the {self.name} communicator"
        return lambda *args, **kwargs: WatchedRequest(call(*args, **kwargs), self.watchdog, what)

    def duplicate(self, name: str) -> WatchedComm:
        """A watched duplicate that the messages call ``name``."""
        dup = self._blocking("Dup", self.comm.Dup)()
        return WatchedComm(dup, self.watchdog, name)

    def Dup(self) -> WatchedComm:  # noqa: N802 - mpi4py's spelling
        """A watched duplicate, named as this one."""
        return self.duplicate(self.name)


def watch(comm: Any, rank: int, mpi: Any, timeout: float | None) -> tuple[Any, Watchdog]:
    """``comm`` (the job's) watched by a new :class:`Watchdog`, and the watchdog; with one rank
    (nobody to wait for) or no ``timeout``: ``comm`` as it is, and a watchdog of nothing.
    Call it on the main thread (it asks MPI for the thread level)."""
    if comm.Get_size() < 2 or timeout is None:
        return comm, Watchdog(None, lambda message: None, rank)  # never called: no thread
    watchdog = Watchdog(timeout, abort_on_stall(comm, rank, mpi), rank)
    return WatchedComm(comm, watchdog, "job"), watchdog


def duplicate(comm: Any, name: str) -> Any:
    """``comm.Dup()``, which the messages call ``name`` where ``comm`` is watched."""
    return comm.duplicate(name) if isinstance(comm, WatchedComm) else comm.Dup()


def abort_on_stall(comm: Any, rank: int, mpi: Any) -> Callable[[str], None]:
    """How a :class:`Watchdog` stops the job: print the message and ``MPI_Abort`` every rank
    where MPI allows a second thread to call it (``MPI_THREAD_MULTIPLE``); else print it and
    end this process, which ``mpiexec`` answers by ending the others. Either way the process
    ends: within :data:`~.leaving.ABORT_GRACE` seconds should ``MPI_Abort`` or the printing
    hang (:func:`~.leaving.last_resort`, which :func:`~.leaving.abort_job` arms too), at once
    should it raise or return."""
    may_abort = mpi is not None and mpi.Query_thread() == mpi.THREAD_MULTIPLE

    def stop(message: str) -> None:
        try:
            if may_abort:  # it arms the last resort itself, and its Abort ends the process
                abort_job(comm, rank, SyncError(message))
            guard = last_resort()  # a write to a stderr pipe nobody reads blocks
            try:
                sys.stderr.write(reason(rank, SyncError(message), ENDING_THIS_RANK))
                # stdout too: a SIGKILL drops what a block-buffered stdout (plain mpiexec) holds
                let_forward()
            finally:  # end_process only kills: nothing it waits on (a test's stand-in does
                # not end it)
                guard.cancel()
        finally:
            end_process()

    return stop
