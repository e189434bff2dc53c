"""A Ctrl-C (a real SIGINT) at any line of closing MPISync's abort hook: the close is made
whole or not at all, never a hook left half closed on the open list."""

from __future__ import annotations

import contextlib
import io
import signal
import sys

import pytest

from distconv.sync.mpi import leaving
from distconv.sync.mpi.leaving import install_abort_hook, is_abort_hook
from tests.mpi.common import AbortRecorder


def _lines(function) -> list[int]:
    """The line numbers ``function``'s own code runs (``co_lines``), in order."""
    return sorted({line for *_, line in function.__code__.co_lines() if line is not None})


def _close_interrupted_at(restore, line: int) -> bool:
    """Call ``restore`` with a SIGINT raised at ``line`` of its code (a trace function's, on
    the line event); whether that line was reached."""
    fired: list[int] = []

    def trace(frame, event, arg):
        if frame.f_code is not restore.__code__:
            return None  # nothing traced in what it calls
        if event == "line" and frame.f_lineno == line and not fired:
            fired.append(line)
            signal.raise_signal(signal.SIGINT)
        return trace

    sys.settrace(trace)
    try:
        restore()
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    return bool(fired)


@pytest.mark.timeout(30)
def test_a_ctrl_c_at_any_line_of_the_hooks_close_closes_it_whole_or_not_at_all(monkeypatch):
    """A Ctrl-C between ``closed = True`` and the mark's clearing left the hook closed yet
    marked and on the open list: run_main left an error to it, which it neither aborted on
    nor handed on, and the list kept its communicator alive; the next close, said to finish
    the job, does nothing (``closes_once``). Every line now either never began the close (a
    hook still open, as before the call) or ends with it whole."""
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    monkeypatch.setattr(leaving, "_open_hooks", [])
    monkeypatch.setattr(leaving, "_exit", lambda status: None)  # the stand-in's Abort returns
    monkeypatch.setattr(leaving, "FORWARD_SECONDS", 0.0)
    probe = install_abort_hook(AbortRecorder())
    lines = _lines(probe)
    probe()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # raises the Ctrl-C
    try:
        reached = [line for line in lines if _interrupted_close(line)]
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(reached) >= 4, reached  # its body's lines, the def's own aside


def _interrupted_close(line: int) -> bool:
    """A hook installed and closed with a Ctrl-C at ``line``: checked whole or untouched (then
    closed again); whether the line was reached."""
    comm = AbortRecorder()
    restore = install_abort_hook(comm)
    hook = sys.excepthook
    reached = _close_interrupted_at(restore, line)
    if is_abort_hook(hook):  # counted open: it must still abort (a closed one hands on)
        with contextlib.redirect_stderr(io.StringIO()):
            hook(ValueError, ValueError("after the close"), None)
        assert comm.aborted == [1], line
    listed = any(h is hook for h in leaving._open_hooks)
    untouched = listed and is_abort_hook(hook) and sys.excepthook is hook
    whole = not listed and not is_abort_hook(hook) and sys.excepthook is sys.__excepthook__
    assert untouched or whole, (line, listed, is_abort_hook(hook), sys.excepthook)
    if untouched:  # never begun: as a Ctrl-C before the call
        restore()
    assert not leaving._open_hooks and sys.excepthook is sys.__excepthook__
    return reached
