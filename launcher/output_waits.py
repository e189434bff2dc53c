"""The time a child's output pump waits on the launcher's own output (a paused pager, a slow
reader of its stdout): meanwhile nothing reads the child's pipe, which fills and blocks the
child, so that time is not the child's own in its wrap-up (:meth:`launcher.child.Child.overdue`).
Only bounded, though: a stuck child that keeps printing into a slow output would be waiting on it
almost all the time, and never be stopped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from .pump import ChildLog
from .shown import shown

#: bytes the pump writes to the launcher's output at once: a longer line goes in pieces, each
#: its own wait, so a line that takes long on an output that moves (1 MB at 400 KB/s) is not
#: one long wait, taken for a stall
WRITE_PIECE = 4096

#: seconds one write to the launcher's output may wait before it is a stall (a pager left
#: paused, a reader stopped): a stall never counts in a child's wrap-up, while the shorter waits
#: (an output that moves, if slowly) do not count only up to the wrap-up's own length in all
OUTPUT_STALL_SECONDS = 1.0
#: seconds between looks at a bounded wait's ``stop`` (a second stop signal: "stop now")
STOP_LOOK = 0.05


class OutputWaits:
    """A child's pump's waits on the launcher's output from the report of its end on."""

    def __init__(self) -> None:
        #: monotonic time the wait under way began, None while the pump does not wait
        self.since: float | None = None
        self._stalled = 0.0  # the waits over OUTPUT_STALL_SECONDS, summed
        self._slowed = 0.0  # the shorter ones
        #: seconds of every wait so far, counted or not (how long the output held the pump)
        self.spent = 0.0

    def begin(self) -> float:
        """Note a wait that begins now (one write); its start, for :meth:`end`."""
        self.since = start = time.monotonic()
        return start

    def end(self, start: float, counted: bool) -> None:
        """Note that the wait begun at ``start`` is over; ``counted``: it is added in, as one
        after the report of the child's end."""
        wait = time.monotonic() - start
        self.spent += wait
        if counted:
            if wait > OUTPUT_STALL_SECONDS:
                self._stalled += wait
            else:
                self._slowed += wait
        self.since = None  # after the sum: held_up() sees the wait in one of them

    def moved(self, counted: bool) -> None:
        """The output moved during the wait under way (a piece of a queued write taken: see
        :class:`launcher.terminal.Terminal`): that wait ends, and another begins, as a write
        of a piece is a wait of its own."""
        since = self.since
        if since is not None:
            self.end(since, counted)
            self.begin()

    def waiting_since(self, moment: float) -> bool:
        """Whether the pump is inside a write that began at or before ``moment`` (monotonic):
        the launcher's output has held it up since then at least (a stall), not a write of an
        output that moves, which the pump happens to be in."""
        since = self.since
        return since is not None and since <= moment

    def held_up(self, now: float, bound: float) -> float:
        """The seconds of waiting, the wait under way up to ``now`` too, not to count in the
        wrap-up: every stall, and the shorter waits up to ``bound`` seconds in all."""
        since = self.since  # first: a wait that ends meanwhile is in a sum read below
        stalled, slowed = self._stalled, self._slowed
        if since is not None and now - since > OUTPUT_STALL_SECONDS:
            stalled += now - since
        elif since is not None:
            slowed += max(now - since, 0.0)
        return stalled + min(slowed, bound)


class PumpWrites:
    """A child's pump's writes, to the launcher's output (:class:`OutputWaits`) and to the
    child's log (:class:`~launcher.pump.ChildLog`): whether they, not a host running the pump
    late, hold it up (:meth:`stuck_after`)."""

    def __init__(self, output: OutputWaits, log: ChildLog) -> None:
        """``output``, ``log``: the pump's writes to each, as it notes them."""
        self._output, self._log = output, log
        self._stuck_look = float("-inf")  # the last look at which a write under way held it

    def took(self) -> float:
        """Seconds the pump's ended writes (the launcher's output, the log) took in all."""
        return self._output.spent + self._log.spent

    def stuck_after(self, bound: float) -> Callable[[float], bool]:
        """From now on, whether the writes hold the pump up, given the monotonic moment of the
        last look (:meth:`launcher.long_line.OutputPipe.end_line`'s ``stuck``): one that began
        at or before it still waits, or they took over ``bound`` seconds in all from now."""
        return partial(self._stuck, self.took(), bound)

    def _stuck(self, spent: float, bound: float, look: float) -> bool:
        if self._output.waiting_since(look) or self._log.writing_since(look):
            self._stuck_look = look  # for held_up: a write begun during the waits may hang
            return True
        return self.took() - spent > bound

    def held_up(self, since: float) -> tuple[bool, bool]:
        """Whether a write to the launcher's output (stalled), and one to the log (hung), is
        under way that began at or before ``since`` (monotonic), or at or before the last look
        at which one held the pump up (:meth:`stuck_after`): it outlasted a whole wait."""
        moment = max(since, self._stuck_look)
        return self._output.waiting_since(moment), self._log.writing_since(moment)


def held_output(
    name: str,
    log_path: Path,
    stalled: bool,
    log_hung: bool = False,
    unheld: bool = False,
    log_cut: bool = False,
) -> str:
    """What the launcher says of child ``name``'s output pipe that it stopped waiting for:
    ``stalled``, its own output held the pump up (:meth:`OutputWaits.waiting_since`): a slow
    one, or a stall of under :data:`OUTPUT_STALL_SECONDS`, after which the launcher's queue
    (:class:`launcher.terminal.Terminal`) drops the line and the pump goes on;
    ``log_hung``, a write to the child's log at ``log_path`` did (a hung file system);
    ``log_cut``, one was under way when a second stop signal cut the wait, too short a time
    to tell a slow file system from a hung one: the launcher's end drains the pipe into the
    log, bounded, and says where it could not (:meth:`launcher.supervisor.Supervisor._drain_logs`);
    ``unheld``, no process holds the pipe, so slow writes (or a loaded host) held the pump up,
    not one that will never end; else a process outside the child's group holds the pipe."""
    log = shown(log_path)
    if log_hung:
        return (
            f"{name}: a write to {log} has not ended (a hung file system?), so {name}'s "
            "last lines are missing from it, from the launcher's output and from failure.json"
        )
    if log_cut:
        return (
            f"{name}: a write to {log} was under way at the second stop signal (a slow "
            f"file system, or a hung one), so {name}'s last lines are missing from failure.json "
            "and the launcher's output; the launcher's end drains the rest into the log, if it "
            "takes them in time"
        )
    if stalled:  # the pump goes on, each line to the log first; at the launcher's end the
        # output is shut and the pipe drained into the log (Supervisor._drain_logs)
        return (
            f"{name}: the launcher's output holds up its lines (read slowly, or not at all), "
            f"so {name}'s last lines are missing from failure.json; {log} gets them all "
            f"(drained there at the launcher's end), its output those it takes before a "
            f"{OUTPUT_STALL_SECONDS:g} s stall or that end"
        )
    if unheld:
        return (
            f"{name}: its output is passed on slowly (a slow reader of the launcher's output, a "
            f"slow file system for {log}, a loaded host), so {name}'s last lines are "
            f"missing from failure.json; {log} gets them all (drained there at the "
            "launcher's end), its output those it takes before that end"
        )
    return (
        f"{name}: a process that left its process group (setsid, a daemon) still holds its "
        "output; it was not stopped"
    )


def joined(thread: threading.Thread, timeout: float, stop: Callable[[], bool] | None) -> bool:
    """Up to ``timeout`` seconds for ``thread`` to end, no longer once ``stop()`` holds (a
    second stop signal: looked at every :data:`STOP_LOOK` seconds); whether it ended."""
    deadline = time.monotonic() + timeout
    while thread.is_alive() and not (stop is not None and stop()):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        thread.join(left if stop is None else min(left, STOP_LOOK))
    return not thread.is_alive()


def write_pieces(lines: list[bytes]) -> list[bytes]:
    """``lines`` (each whole, a message maybe of many) as the writes for them: whole lines, up
    to :data:`WRITE_PIECE` bytes a write (one write is one piece of progress, and never cuts a
    line that a launcher message on the same file, ``2>&1``, could then split), a longer entry
    (a failure report) cut at its line ends, a line longer than a piece in pieces of that size.

    On a pipe a write of :data:`WRITE_PIECE` (``PIPE_BUF``) bytes at most is taken whole or not
    at all, so an output the launcher leaves between two writes (a second stop signal) ends on
    a whole line, but within a line longer than a piece: the report cut at every 4 KiB, mid
    line, ended the launcher's stderr so on a slow reader."""
    pieces, piece = [], b""
    for entry in lines:
        for line in entry.splitlines(keepends=True) if len(entry) > WRITE_PIECE else [entry]:
            if piece and len(piece) + len(line) > WRITE_PIECE:
                pieces.append(piece)
                piece = b""
            if len(line) > WRITE_PIECE:
                pieces += [line[at : at + WRITE_PIECE] for at in range(0, len(line), WRITE_PIECE)]
            else:
                piece += line
    return [*pieces, piece] if piece else pieces
