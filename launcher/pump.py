"""What a child's output pump (:meth:`launcher.child.Child._copy`) does beside reading the
child's pipe and passing its lines on: the lines' copy in the child's log, and the files it
shares with the launcher, closed once both let go (:class:`PumpFiles`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from distconv.files import describe_os_error

from .shown import shown


def log_line(
    log: BinaryIO, line: bytes, log_path: Path, name: str, say: Callable[[str], None] | None
) -> str | None:
    """Write ``line`` to child ``name``'s ``log`` (at ``log_path``); None, or, where it cannot
    be (a full disk), why (``no space left on device``), said once through ``say``: the pump
    must go on draining the pipe, or the child blocks on its next write for good."""
    try:
        log.write(line)
    except OSError as exc:
        why = describe_os_error(exc)
        if say is not None:
            say(
                f"cannot write {shown(log_path)}: {why}; "
                f"{name}'s later lines go to the launcher's output only"
            )
        return why
    return None


class ChildLog:
    """A child's log as its pump writes it (:meth:`write`), and when the write under way began
    (:attr:`since`): a log that blocks (a hung network file system) may hold the pump up for
    good, unlike a host that runs the pump late."""

    def __init__(
        self, log: BinaryIO, log_path: Path, name: str, say: Callable[[str], None] | None
    ) -> None:
        """:func:`log_line`'s arguments but the line."""
        self._args = (log_path, name, say)
        self._log = log
        #: monotonic time the write under way began, None while the pump does not write
        self.since: float | None = None
        #: seconds of the writes so far (how long the log held the pump)
        self.spent = 0.0
        #: why a write failed (``no space left on device``), after which the pump writes no
        #: more: the log lacks the later lines, which the failure report must not send one to
        self.error: str | None = None

    def write(self, line: bytes) -> bool:
        """:func:`log_line` of ``line``: whether it was written (else :attr:`error` says why)."""
        self.since = since = time.monotonic()
        try:
            self.error = log_line(self._log, line, *self._args) or self.error
            return self.error is None
        finally:
            self.spent += time.monotonic() - since
            self.since = None

    def writing_since(self, moment: float) -> bool:
        """Whether the pump is inside a write that began at or before ``moment`` (monotonic)."""
        since = self.since
        return since is not None and since <= moment


class PumpFiles:
    """A child's files that its pump and the launcher both use (its pipe, its log): closed
    once both let go (:meth:`let_go`), whichever is last. The launcher lets go as it stops
    waiting for the pump, which may go on (a process outside the child's group holds the
    pipe) till that process lets go: then the pump closes them as it ends."""

    def __init__(self, *files: BinaryIO) -> None:
        """``files``: closed in this order, once both have let go."""
        self._files = files
        self._holders = 2  # the launcher and the pump
        self._lock = threading.Lock()
        #: set as the pump ends (:meth:`held_by`): the child's tail then holds every line the
        #: pump read, the last ones before the pipe's end included
        self.pump_ended = threading.Event()

    def let_go(self, holders: int = 1) -> None:
        """``holders`` of the two let go (2: the launcher, for a pump that never started);
        the last closes the files."""
        with self._lock:
            self._holders -= holders
            if self._holders > 0:
                return
        for each in self._files:
            each.close()

    def held_by(self, pump: Callable[..., None]) -> Callable[..., None]:
        """``pump``, letting go as it ends, however it ends (:attr:`pump_ended` says it has):
        a thread's target."""

        def run(*args: object) -> None:
            try:
                pump(*args)
            finally:
                self.pump_ended.set()
                self.let_go()

        return run
