"""A Ctrl-C raised in a watched call's sign-off, as a SIGINT's handler would raise it: at a
chosen step of watchdog.py's code after the wrapped call (a stand-in's) returned."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from distconv.sync.mpi import watchdog

WATCHDOG_FILE = watchdog.__file__


class SignOffInterrupts:
    """One interrupt (``raised``: whether it was) at the ``place``-th event (a line, a call)
    of watchdog.py after the ``after``-th return of a stand-in's method named in ``names``.
    One only: Python unsets a trace function that raises."""

    def __init__(self, names: tuple[str, ...], place: int, after: int) -> None:
        self.names, self.place, self.after = names, place, after
        self.raised, self._returns, self._seen = False, 0, 0

    def trace(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        """The trace function (``sys.settrace``)."""
        code = frame.f_code
        if code.co_filename == WATCHDOG_FILE:
            if self._returns == self.after:
                self._seen += 1
                if self._seen == self.place:
                    self.raised = True
                    raise KeyboardInterrupt(f"at step {self.place} of a sign-off")
        elif code.co_name in self.names and event == "return":
            self._returns += 1
        return self.trace


@contextmanager
def interrupting(
    names: tuple[str, ...], place: int = 1, after: int = 1
) -> Iterator[SignOffInterrupts]:
    """Within: the Ctrl-C of :class:`SignOffInterrupts`."""
    interrupts, previous = SignOffInterrupts(names, place, after), sys.gettrace()
    sys.settrace(interrupts.trace)
    try:
        yield interrupts
    finally:  # a tracer of the run's own (coverage, a debugger) traces again
        sys.settrace(previous)
