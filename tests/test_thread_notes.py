"""The notes of an error that ends a thread (PEP 678: ``add_note``) follow threading's report
of it before Python 3.11 too, where threading's own hook prints none: the process goes on, and
no exit says them later. On the Python the suite runs under, the backport is driven as before
3.11 (``add_note`` then puts ``distconv.notes``' hook in place of threading's); run under 3.10,
the same test shows the note said where threading's own hook left it out."""

from __future__ import annotations

import threading

import pytest

from distconv import notes
from distconv.notes import add_note

NOTE = "the kernel beside it failed too: MemoryError()"


def _noted_failure() -> None:
    """A thread's work that fails with a note, as a kernel's beside a failing one does."""
    error = ValueError("the kernel failed")
    add_note(error, NOTE)
    raise error


@pytest.fixture()
def threading_as_a_script_has_it(monkeypatch):
    """threading's own hook installed (pytest's, which catches a thread's error, set aside),
    ``add_note`` as before Python 3.11; both put back after."""
    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)
    monkeypatch.setattr(notes, "NATIVE_NOTES", False)


def test_a_thread_ended_by_a_noted_error_says_the_note_under_its_report(
    threading_as_a_script_has_it, capsys
):
    worker = threading.Thread(target=_noted_failure, name="kernel-1")
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "Exception in thread kernel-1:", lines
    assert lines[-2:] == ["ValueError: the kernel failed", NOTE], lines
    # on Python 3.11 threading's own prints the note too: the hook that says it on 3.10
    assert threading.excepthook is not threading.__excepthook__


def test_a_hook_of_the_scripts_own_is_left_in_place(threading_as_a_script_has_it, monkeypatch):
    """A script that reports its threads' errors itself keeps its hook: only threading's own
    is replaced."""

    def own(args: threading.ExceptHookArgs) -> None:
        pass

    monkeypatch.setattr(threading, "excepthook", own)
    add_note(ValueError("x"), "a note")
    assert threading.excepthook is own


class _UnformattableNote(str):
    """A note (a ``str`` subclass, which ``add_note`` takes) that cannot be formatted."""

    def __format__(self, spec: str) -> str:
        raise RuntimeError("this note cannot be formatted")


def _failure_with_an_unformattable_note() -> None:
    error = ValueError("the kernel failed")
    add_note(error, _UnformattableNote(NOTE))
    raise error


def test_a_note_that_cannot_be_formatted_leaves_the_report_to_threadings_own(
    threading_as_a_script_has_it, monkeypatch, capsys
):
    """Formatting the report failed inside the hook, and threading said that failure in the
    error's place (``Exception in threading.excepthook``): the thread's own error was said
    nowhere. threading's own report says it instead. (As on 3.10 without ``exceptiongroup``,
    whose ``traceback`` prints no notes, so :mod:`distconv.notes` formats them itself.)"""
    monkeypatch.setattr(notes, "_traceback_prints_notes", lambda: False)
    worker = threading.Thread(target=_failure_with_an_unformattable_note, name="kernel-2")
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    said = capsys.readouterr().err
    assert "Exception in threading.excepthook" not in said, said
    assert said.startswith("Exception in thread kernel-2:\n"), said
    assert "ValueError: the kernel failed" in said, said
