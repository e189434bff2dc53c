"""Ranks as processes of their own, for a check: each runs a function, sends back its result,
and is gone by the time the caller goes on.

Spawned (``multiprocessing``'s spawn: no state of the caller's copied in, as a rank started by
a launcher has none), each with its output in a file of its own: what a rank that failed said
is its error's, not mixed into the caller's. A rank that raises or dies ends the wait soon
(its peers, waiting for it in a collective, would wait until the timeout): the others get
:data:`GRACE` seconds to end, so that the error names every rank that failed, the cause among
the consequences, and every rank still running is killed before the error is raised. Each
rank is a process group of its own, killed whole: the processes its transport started (a
server, a helper) go with it, unless they left the group (``setsid``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import pickle
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

#: how much of a failed rank's output its error quotes
TAIL_CHARS = 3000

#: how long, once a rank has failed, the others have to end before the error names every rank
#: that failed by then (the rest are killed)
GRACE = 2.0


def check_picklable(value: Any, what: str) -> None:
    """Raise ``TypeError`` naming ``what`` where ``value`` cannot be sent to a spawned process."""
    if not callable(value):
        raise TypeError(f"{what} must be callable, got {value!r}")
    try:
        pickle.dumps(value)
    except Exception as exc:  # PicklingError, AttributeError ("Can't pickle local object")
        raise TypeError(
            f"{what} must be picklable, as each rank's process gets it pickled: a module-level "
            f"function or class, or a functools.partial of one (not a lambda, nor a function "
            f"defined inside another); {value!r} is not ({type(exc).__name__}: {exc})"
        ) from exc


@dataclasses.dataclass
class Ranks:
    """What :func:`run_ranks` brings back: each rank's result, in rank order, and what the
    caller computed meanwhile."""

    results: list[Any]
    meanwhile: Any


def run_ranks(
    target: Callable[..., Any],
    args: Sequence[tuple[Any, ...]],
    meanwhile: Callable[[], Any],
    timeout: float,
) -> Ranks:
    """Run ``target(*args[r])`` in a process of its own for each rank r, and ``meanwhile()``
    here while they run.

    Raises:
        AssertionError: a rank raised (its error's last line), or exited without a result
            (its exit status), each with the end of its output, and with it every other rank
            that failed within :data:`GRACE` seconds (a peer it failed, or the rank that failed
            it); or ranks still ran after ``timeout`` seconds (named). The other ranks are
            killed first.
        ValueError: ``timeout`` is not a positive number of seconds.
    """
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="distconv-ranks-") as folder:
        ranks = [_Rank(context, r, target, a, Path(folder)) for r, a in enumerate(args)]
        try:
            for rank in ranks:
                rank.start()
            began = time.monotonic()
            done = meanwhile()
            return Ranks(_results(ranks, began + timeout, timeout), done)
        finally:  # a failure, a timeout, the caller's Ctrl-C: none of them outlives the call
            for rank in ranks:
                rank.end()


class _Rank:
    def __init__(self, context: Any, rank: int, target: Callable, args: tuple, folder: Path):
        self.rank, self.log = rank, folder / f"rank{rank}.log"
        self.conn, sender = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_main,
            args=(target, pickle.dumps(args), str(self.log), sender),  # unpickled where it logs
            name=f"rank {rank}",
        )
        self._sender: Connection | None = sender
        self.result: tuple[str, Any] | None = None

    def start(self) -> None:
        self.process.start()
        self._sender.close()  # the child's now: its end closes when the child is gone
        self._sender = None

    def take(self) -> None:
        """Read what it sent, if it has; a rank that ended without sending is taken for one
        that failed, its exit status telling how."""
        if self.result is None and self.conn.poll():
            try:
                self.result = self.conn.recv()
            except (EOFError, OSError):  # ended, or died mid-send: its exit status tells
                self.result = ("error", "it ended without sending its result")

    def running(self) -> bool:
        """Neither sent anything nor ended."""
        return self.result is None and self.process.is_alive()

    def failure(self) -> str:
        self.process.join(5)  # it sent its error, or closed its end: it is ending
        said = self.result[1] if self.result is not None else "it sent no result"
        if not self.log.exists():  # _main never ran: the process failed while spawn started it
            said = _NOT_STARTED
        return (
            f"rank {self.rank} failed (exit status {self.process.exitcode}): {said}"
            f"\n--- the end of rank {self.rank}'s output ---\n{self.tail()}"
        )

    def tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(none)"
        return text[-TAIL_CHARS:] or "(none)"

    def end(self) -> None:
        if self.process.pid is not None:
            # its group first, while it is not yet reaped (so its pid names no other group):
            # what its transport started (a server, a helper process) goes with it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            if self.process.is_alive():  # killed before it made its group
                self.process.kill()
            self.process.join()
        self.conn.close()
        if self._sender is not None:  # never started
            self._sender.close()


def _results(ranks: list[_Rank], deadline: float, timeout: float) -> list[Any]:
    """Each rank's result, waiting until ``deadline``; raises once one has failed, naming every
    rank that failed (:func:`_failures`)."""
    pending = list(ranks)
    while pending:
        left = deadline - time.monotonic()
        ready = wait(
            [r.conn for r in pending] + [r.process.sentinel for r in pending], max(left, 0)
        )
        if not ready:
            hung = ", ".join(str(r.rank) for r in pending)
            tails = "".join(
                f"\n--- the end of rank {r.rank}'s output ---\n{r.tail()}" for r in pending
            )
            raise AssertionError(f"rank(s) {hung} still ran after {timeout:g} s: killed{tails}")
        for rank in list(pending):
            rank.take()
            if rank.result is not None and rank.result[0] == "result":
                pending.remove(rank)
        if any(not r.running() for r in pending):
            raise AssertionError(_failures(pending))
    return [r.result[1] for r in ranks]


def _failures(pending: list[_Rank]) -> str:
    """Every rank of ``pending`` that failed, once the others have had :data:`GRACE` seconds to
    end: one rank's failure fails its peers (a connection closed under them), and which of them
    the wait sees first is chance, so naming only that one would often name a consequence and
    leave out the cause."""
    until = time.monotonic() + GRACE
    running = [r for r in pending if r.running()]
    while running and (left := until - time.monotonic()) > 0:
        wait([r.conn for r in running] + [r.process.sentinel for r in running], left)
        for rank in running:
            rank.take()
        running = [r for r in running if r.running()]
    ok = [r for r in pending if r.result is not None and r.result[0] == "result"]
    said = [r.failure() for r in pending if r not in running and r not in ok]
    if running:
        said.append(f"rank(s) {', '.join(str(r.rank) for r in running)} still ran: killed")
    return "\n".join(said)


#: why a rank failed that ended before :func:`_main` ran
_NOT_STARTED = (
    "it ended before its function ran, as spawn started it (its error is on this process's "
    "stderr, not in its output): spawn imports the caller's __main__ again in each rank, so a "
    "script that calls this keeps that call under 'if __name__ == \"__main__\":', and is "
    "read from a file, not from stdin"
)


def _main(target: Callable, args: bytes, log: str, sender: Connection) -> None:
    """A rank's process: its output to ``log``, then ``target``'s result on ``args`` unpickled
    (or its error's last line) to ``sender``. A process group of its own, which the caller
    kills: what it starts (its transport's helper processes) ends with it. ``args`` are
    unpickled here, once the output goes to ``log``: an error importing what they name (a
    make_sync defined in a notebook) is then the rank's error, with its traceback."""
    os.setpgid(0, 0)
    with open(log, "ab", buffering=0) as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
    try:
        result = target(*pickle.loads(args))
    except BaseException as exc:
        traceback.print_exc()  # into its log, which the error quotes
        sender.send(("error", f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None
    sender.send(("result", result))
