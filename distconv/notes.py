"""Notes on an exception (PEP 678) on every Python distconv runs on.

A note says what the error's own line cannot: whether the other ranks were told, what a stop
saved and how to go on, a second failure met while handling the first. ``BaseException.add_note``
came in Python 3.11; before it, :func:`add_note` keeps the same ``__notes__`` list, which
distconv's own endings (:func:`distconv.logs.interrupted_line`) and a script's ``except`` read
alike, and logs each note as a warning when it is made: the 3.10 interpreter prints no notes
under a traceback, and a note that only lived in ``__notes__`` would reach nobody there.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger(__name__)

#: whether the interpreter keeps and prints notes itself (``BaseException.add_note``)
NATIVE_NOTES = sys.version_info >= (3, 11)


def add_note(error: BaseException, note: str) -> None:
    """Add ``note`` to ``error``'s notes, after any it has: ``error.add_note(note)`` from
    Python 3.11 on. Before, appended to ``error.__notes__`` (made where it has none) and
    logged as a warning, so that the user sees it where the traceback would not show it.

    Raises:
        TypeError: ``note`` is not a string, or ``error.__notes__`` is set to something
            other than a list, as ``add_note`` raises from Python 3.11 on.
    """
    if NATIVE_NOTES:
        error.add_note(note)
        return
    if not isinstance(note, str):
        raise TypeError(f"note must be a str, not {type(note).__name__!r}")
    if not hasattr(error, "__notes__"):
        error.__notes__ = []  # the attribute Python 3.11 makes on a first note
    if not isinstance(error.__notes__, list):
        raise TypeError("Cannot add note: __notes__ is not a list")
    error.__notes__.append(note)
    log.warning("%s", note)


def notes_of(error: BaseException) -> list[str]:
    """``error``'s notes, as Python's traceback reads them: the strings in its ``__notes__``
    where that is a list; none where it has none, or something else there."""
    notes = getattr(error, "__notes__", None)
    return [note for note in notes if isinstance(note, str)] if isinstance(notes, list) else []
