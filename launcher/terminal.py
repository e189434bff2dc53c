"""The launcher's output as the children's pumps see it: a view that a stalled reader cannot
make hold up the job.

A pump writes each line to its child's log (the record), then hands it to :class:`Terminal`,
which queues it, bounded (:data:`QUEUE_BYTES`), for one writer thread that writes the launcher's
stdout. While that output moves, a full queue makes the pumps wait for room (a slow reader
slows the job, as before); once one write has been under way for
:data:`~launcher.output_waits.OUTPUT_STALL_SECONDS` (a paused pager, Ctrl-S, ``| (sleep
1000)``), the lines for it are dropped at once, counted per child, and once a child's line fits
again (the output moved) one line first says how many of that child's were not shown and where
its log, which has them all, is. Each child's lines keep their order; a line is queued whole,
or not at all. A stdout that is gone (``| head``: EPIPE) or closed takes no line more:
:meth:`Terminal.put` answers False, as a write there did.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from distconv.files import describe_os_error

from .arrivals import deaf_thread
from .output_waits import OUTPUT_STALL_SECONDS, STOP_LOOK, joined, write_pieces
from .shown import shown

#: bytes of lines queued for the launcher's output at most (the launcher's memory for a stalled
#: output, whatever the number of children): a few seconds of any job's output
QUEUE_BYTES = 4 * 1024 * 1024
#: bytes the writer takes from the queue for one write: few system calls for many short lines
BATCH_BYTES = 64 * 1024

#: the name the launcher's own lines are queued under (:meth:`Terminal.say`): they have no log
LAUNCHER = "the launcher"
#: a queued line: its child's name, its log (None: the launcher's own), the line, the child's
#: lines it stands for, and the numbers of the first and the last of them (a long line's
#: pieces share one: :meth:`Terminal.put`'s ``continued``), so that no line counts twice
_Entry = tuple[str, "Path | None", bytes, int, int, int]


class Terminal:
    """The launcher's output, written by a thread of its own from a bounded queue.

    Args:
        out: the launcher's stdout (bytes).
        notice: the launcher's own line (its newline included) for a message, as the
            launcher writes its messages (text or a JSON object).
        bound: bytes queued at most (:data:`QUEUE_BYTES`).
        failed: the launcher's message where a write fails otherwise than on a reader that
            is gone (EPIPE, as ``| head``: its choice): a full disk must not go unsaid.
    """

    def __init__(
        self,
        out: BinaryIO,
        notice: Callable[[str], bytes],
        bound: int = QUEUE_BYTES,
        failed: Callable[[str], None] | None = None,
    ) -> None:
        self._out, self._notice, self._bound, self._failed = out, notice, bound, failed
        self._ready = threading.Condition()
        #: (child's name, its log, the line, the child's lines it stands for: 1, or a drop
        #: notice's count) in order, and their bytes, the write's included
        self._queue: collections.deque[_Entry] = collections.deque()
        self._writing: collections.deque[_Entry] = collections.deque()  # the write under way
        self._taken = 0  # bytes of its first line written
        self._size = 0
        #: child: lines not shown, its log, the numbers of the first and last of them
        self._dropped: dict[str, tuple[int, Path | None, int, int]] = {}
        self._numbers: dict[str, int] = {}  # child: the number of its last line put
        #: child: its lines refused at the end (:meth:`late`), its log, the last one's number
        self._late: dict[str, tuple[int, Path, int]] = {}
        self._gone = self._closing = self._ended = False  # ended: the writer is done
        self._shut = False  # the children's lines refused: their pumps drain into the logs
        self._write_since: float | None = None  # monotonic start of the write under way
        self._line_ended = True  # the last piece written ended a line (leave() ends it else)
        self._leaving, self._left = False, 0  # at a second stop signal (:meth:`leave`): dropped
        self._left_when = "at a second stop signal"  # when leave() came, as its count says
        self._report: Path | str = "failure.json"  # the report's file last put(): leave() names it
        self._writer = threading.Thread(target=self._drain, name="terminal", daemon=True)
        self._writer.start()

    def put(
        self,
        name: str,
        log: Path | None,
        line: bytes,
        moved: Callable[[], None] | None = None,
        report: Path | None = None,
        continued: bool = False,
    ) -> bool:
        """Queue ``line`` (whole lines) of child ``name``, whose log is ``log``. Where the
        queue is full it waits for room while the output moves (a slow reader slows the job,
        as a terminal does), but once a write has been under way for
        :data:`~launcher.output_waits.OUTPUT_STALL_SECONDS` (a stall) the line is dropped and
        counted, at once: so a stalled output holds a pump up a second at most. False where
        the output is gone (then nothing more is queued). ``moved``: called under the lock
        each time a wait for room ends (a piece written, as a rule): the pump's waits, each a
        piece's, as it counts them in a child's wrap-up
        (:meth:`~launcher.output_waits.OutputWaits.moved`). ``report``: the file that holds
        ``line`` too (a launcher's failure report, ``failure.json``), named by the drop
        notice where it is dropped. A child's line (``log`` given) once :meth:`shut` or the
        writer has ended, also one waiting for room, is not queued but counted at once, and
        True (the pump goes on into its log, each line counted: :meth:`late`); the launcher's
        own then answers False. ``continued``: ``line`` is a later piece of the line put
        before (a line over 1 MiB: :class:`launcher.long_line.LongLine`), one line with it in
        the counts of lines not shown."""
        with self._ready:
            if self._gone or (self._ended and log is None):
                return False
            self._report = report or self._report  # named where leave() drops messages
            number = self._numbers.get(name, 0) + (0 if continued else 1)
            self._numbers[name] = number
            while self._size and self._size + len(line) > self._bound:  # one always fits
                stalled = self._stalled_for()
                if self._gone:
                    return False
                if self._shut and log is not None:
                    return self._count_late(name, log, number)
                if stalled >= OUTPUT_STALL_SECONDS:  # dropped, counted: said once it moves
                    count, kept, first, last = self._dropped.get(name, (0, log, number, 0))
                    count += last != number  # a long line's later piece: counted already
                    self._dropped[name] = (count, report or kept, first, number)
                    return True
                self._ready.wait(OUTPUT_STALL_SECONDS - stalled)  # it moves: wait for room
                if moved is not None:
                    moved()
            if self._gone:  # it went while this one waited: its give-up emptied the queue
                return False
            if log is not None and (self._ended or self._shut):  # shut while it waited too:
                return self._count_late(name, log, number)  # room then, behind close()'s count
            self._say_dropped(name)  # before the line: the gap is said where it is
            self._append((name, log, line, 1, number, number))
            return True

    def _count_late(self, name: str, log: Path, number: int) -> bool:
        """Count line ``number`` of child ``name`` (under the lock) among those the output
        took no more (:meth:`late`), once; True, as :meth:`put` answers then."""
        count, _log, last = self._late.get(name, (0, log, 0))
        self._late[name] = (count + (last != number), log, number)
        return True

    def late(self) -> str | None:
        """What the launcher says of the children's lines that came once the output took no
        more (:meth:`shut`, or its writer ended at :meth:`close`), which their logs alone
        have; None where none came. A pump still reading at the end (a pipe the output held
        up, one a stray holds) passed them on to its log alone, unsaid."""
        with self._ready:
            if not self._late:
                return None
            said = "; ".join(
                f"{n} line(s) of {name} ({shown(log)})" for name, (n, log, _) in self._late.items()
            )
        return (
            f"the launcher's output took no more lines at the job's end, so it lacks {said}, "
            "which came after: their logs have them"
        )

    def say(self, line: bytes, report: Path | None = None) -> bool:
        """Queue the launcher's own ``line`` (a message, whole, on stdout's file, ``2>&1``),
        as :meth:`put` queues a child's: after the lines before it, dropped at a stall and
        counted (said once the output moves). False where it was not: the output is gone, or
        the writer has ended (:meth:`close`): then it is the caller's to write. ``report``:
        where a failure report that ``line`` says is written (:meth:`put`)."""
        return self.put(LAUNCHER, None, line, report=report)

    def shut(self) -> None:
        """Refuse the children's lines from now on (:meth:`put` counts them at once, a pump's
        waiting for room too: :meth:`late`): at the launcher's end, after :meth:`close` gave
        up on a slow output, their pumps drain their pipes into the logs alone rather than
        wait on it. The launcher's own lines are still queued (a stall drops them, no block)."""
        with self._ready:
            self._shut = True
            self._ready.notify_all()

    def _stalled_for(self) -> float:
        """Seconds the write under way has taken so far (under the lock; 0 with none)."""
        since = self._write_since
        return 0.0 if since is None else time.monotonic() - since

    def written(self, patience: float, stop: Callable[[], bool] | None = None) -> bool:
        """Wait until every line put so far is written (the launcher's messages on stderr, as
        a failure's report, come after its children's lines), giving up after ``patience``
        seconds, at a stall, or once ``stop()`` holds (looked at every :data:`STOP_LOOK`
        seconds: a second stop signal, "stop now"); whether they all were."""
        deadline = time.monotonic() + patience
        with self._ready:
            while self._size and not self._gone:
                left = deadline - time.monotonic()
                if left <= 0 or self._stalled_for() >= OUTPUT_STALL_SECONDS:
                    return False
                if stop is not None and stop():
                    return False
                self._ready.wait(
                    min(left, OUTPUT_STALL_SECONDS, left if stop is None else STOP_LOOK)
                )
            return True

    def pending(self) -> int:
        """Bytes queued or being written: 0 once the output has taken every line put."""
        with self._ready:
            return self._size

    def _say_dropped(self, name: str) -> None:
        """Queue the count of ``name``'s lines not shown, if any (one a child: still bounded)."""
        if name in self._dropped:
            count, log, first, last = self._dropped.pop(name)
            if name == LAUNCHER:  # its own messages: ``log`` is a dropped report's file
                said = f"{count} message(s) of {name} not shown: its output was stalled"
                if log is not None:  # the report that says why the job ended: not lost
                    said += f"; the failure report among them is in {shown(log)}"
                log = None  # no child's lines: the close's count of lines unshown skips it
            else:
                said = f"{count} line(s) of {name} not shown: the launcher's output was stalled "
                said += f"(nothing read it); {shown(log)} has them all"
            self._append((name, log, self._notice(said), count, first, last))  # it stands for them

    def _say_all_dropped(self) -> None:
        """:meth:`_say_dropped` for every child with lines dropped (under the lock)."""
        for name in list(self._dropped):
            self._say_dropped(name)

    def _append(self, entry: _Entry) -> None:
        self._queue.append(entry)
        self._size += len(entry[2])
        self._ready.notify_all()  # the writer (pumps waiting for room wake and wait again)

    def _drain(self) -> None:
        """The writer thread (:meth:`_write_all`), which ends the view, said, where it fails:
        a write's OS error, or anything else (a bug, a stream's own error), which otherwise
        ended the thread with a traceback and left the view queueing lines nothing wrote."""
        deaf_thread()  # the main thread takes the stop signals, in the order they come
        try:
            self._write_all()
        except Exception as exc:  # noqa: BLE001 -- gone (EPIPE), full, closed, or a bug: said
            self._give_up(exc)

    def _write_all(self) -> None:
        """The queued lines to the output, in order, till :meth:`close`; a piece at a time
        (:func:`~launcher.output_waits.write_pieces`), each piece written its progress (a stall is a
        piece's write that does not end, not a long batch or line on an output that moves)."""
        while True:
            with self._ready:
                while not self._queue and not self._closing:
                    self._ready.wait()
                if self._leaving:  # said wherever leave() found the writer: here too, where it
                    self._left_said()  # emptied the queue before a batch (it once said none)
                if self._closing:  # dropped since close() said them: said before the end
                    self._say_all_dropped()
                if not self._queue:
                    self._ended = True  # a line queued from now on would never be written
                    return
                batch, size = self._writing, 0  # the write under way: not shown yet
                while self._queue and size < BATCH_BYTES:
                    batch.append(self._queue.popleft())
                    size += len(batch[-1][2])
                pieces = write_pieces([entry[2] for entry in batch])
                self._write_since, self._taken = time.monotonic(), 0
            for piece in pieces:  # outside the lock: a stalled write holds up no put()
                if self._leaving:  # a second stop signal: the rest of the batch is dropped
                    break
                self._out.write(piece)
                self._out.flush()
                with self._ready:
                    self._moved(len(piece))
                    self._line_ended = piece.endswith(b"\n")  # where a cut leaves the output
            with self._ready:
                self._write_since = None

    def _give_up(self, exc: Exception) -> None:
        """No more output after ``exc``: what is queued is dropped, :meth:`put` answers False
        from now on, and, but for a reader that is gone (EPIPE, as ``| head``: its choice) or
        a closed stream, the launcher says why, once."""
        with self._ready:
            logs = sorted({str(e[1].parent) for e in self._writing if e[1] is not None})
            self._gone = True
            self._queue.clear()
            self._writing.clear()
            self._ready.notify_all()
            self._size = 0
        if self._failed is None or isinstance(exc, (BrokenPipeError, ValueError)):
            return
        why = describe_os_error(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}"
        if not isinstance(exc, OSError) and str(exc):
            why += f": {exc}"
        where = f" ({', '.join(map(shown, logs))})" if logs else ""
        self._failed(
            f"cannot write the launcher's output: {why}; the children's lines from now on "
            f"are in their logs alone{where}"
        )

    def _moved(self, wrote: int) -> None:
        """``wrote`` more bytes of the write under way taken (under the lock): its stall clock
        starts again, and the lines now written whole leave the queue's bytes and count."""
        self._write_since, self._taken = time.monotonic(), self._taken + wrote
        while self._writing and len(self._writing[0][2]) <= self._taken:
            done = len(self._writing.popleft()[2])
            self._taken -= done
            self._size -= done
        self._ready.notify_all()  # room: the pumps waiting for it

    def close(
        self, patience: float, stall_ends: bool = False, stop: Callable[[], bool] | None = None
    ) -> str | None:
        """Say the drops not yet said, then wait up to ``patience`` seconds for the queue to
        be written (the launcher's end must not hang on a view), or, ``stall_ends`` (a
        launcher stopped by a signal, which must end promptly), till a stall at most; and no
        longer once ``stop()`` holds (a second stop signal: the launcher ends now).
        Returns, where it was not, what the launcher says of the lines it could not show (and
        where they are), else None; then, under the lock that counts them, the view is
        :meth:`shut`: a pump given room after the count would queue a line nothing writes,
        neither in it nor in :meth:`late`, and the children's lines it counts leave the queue
        (but the write under way): a writer that goes on took them on, though said missing.
        The lines dropped meanwhile are in the count."""
        with self._ready:
            self._say_all_dropped()
            self._closing = True
            self._ready.notify_all()
        deadline = time.monotonic() + patience
        if not stall_ends or self.written(patience, stop):
            joined(self._writer, deadline - time.monotonic(), stop)
        if not self._writer.is_alive():
            return None
        with self._ready:  # given up: a pump that gets room from now on is late, not
            self._say_all_dropped()  # dropped during the wait: their notice, in the count
            self._shut = True  # queued behind this count, neither shown nor counted
            self._ready.notify_all()
            if stop is not None and stop():
                why = "was left at a second stop signal"
            elif self._stalled_for() >= OUTPUT_STALL_SECONDS and stall_ends:
                why = "is stalled on its last lines (nothing reads it)"
            else:
                why = f"did not take its last lines within {patience:g} s (nothing reads it, or "
                why += "too slowly)"
            said = self._unshown(why)
            # the children's lines counted are not written after all (a slow output took them
            # on, said missing): the launcher's own, behind them, get the output's time
            self._size -= sum(len(entry[2]) for entry in self._queue if entry[1] is not None)
            self._queue = collections.deque(entry for entry in self._queue if entry[1] is None)
            return said

    def leave(self, patience: float, when: str = "at a second stop signal") -> None:
        """Once :meth:`close` gave up (at a second stop signal, or on a slow output at the
        launcher's end: ``when`` it was): drop what is queued and the rest of the write under
        way (after its piece in flight), and have the writer say, on a line of its own, how
        many of the launcher's messages were not written, within ``patience`` seconds. A slow
        reader of the launcher's own stderr kept the launcher up to
        :data:`~launcher.child.OUTPUT_DRAIN_SECONDS` after a second signal, its last messages
        trickling out; after a first one, they were dropped at that end, unsaid."""
        with self._ready:
            if self._ended or self._gone:
                return
            self._left_when = when
            self._leaving, self._left = True, sum(entry[3] for entry in self._queue)
            self._size -= sum(len(entry[2]) for entry in self._queue)
            self._queue.clear()
            self._ready.notify_all()
        joined(self._writer, patience, None)

    def _left_said(self) -> None:
        """The writer's end of :meth:`leave` (under the lock): the rest of its batch dropped,
        the line counting its messages not written queued (a cut line's: :meth:`close`'s)."""
        cut, self._taken, self._leaving = not self._line_ended, 0, False  # the notice: written
        dropped, self._left = self._left + sum(e[3] for e in self._writing if e[1] is None), 0
        self._size -= sum(len(entry[2]) for entry in self._writing)  # a say() since: queued
        self._writing.clear()
        if not dropped:
            return
        said = f"{dropped} message(s) of the launcher not written: its output took them too slowly"
        said += f" {self._left_when} (a failure report, if any, is in {shown(self._report)})"
        self._append((LAUNCHER, None, (b"\n" if cut else b"") + self._notice(said), 0, 0, 0))

    def _unshown(self, why: str) -> str | None:
        """What is still queued (under the lock), by child, as the launcher says it: a drop
        notice not written counts the lines it stands for, which the output lacks too."""
        counts: dict[str, tuple[int, Path | None, int]] = {}  # lines, log, the last's number
        for name, log, _line, lines, first, last in [*self._writing, *self._queue]:
            if log is None:  # the launcher's own messages: the report is in failure.json
                continue
            count, _log, before = counts.get(name, (0, log, 0))
            counts[name] = (count + lines - (first == before), log, last)  # a line once
        if not counts:
            return None
        said = "; ".join(f"{n} line(s) of {k} ({shown(p)})" for k, (n, p, _) in counts.items())
        return f"the launcher's output {why}, so it lacks {said}: their logs have them"
