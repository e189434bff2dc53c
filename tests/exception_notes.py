"""What an exception's notes hold on the Python a test runs under.

``BaseException.add_note`` and ``__notes__`` came in Python 3.11; the project supports 3.10
(``requires-python >= 3.10``), where an exception has no notes and the product's guarded
``add_note`` calls make none (some say the words another way: a warning, a log line). A test
expects the notes from 3.11 on and none before with these.
"""

from __future__ import annotations

import sys

#: whether exceptions carry notes here (Python 3.11 on)
NOTES_KEPT = sys.version_info >= (3, 11)


def expected_notes(*notes: str) -> list[str]:
    """What ``__notes__`` holds once ``notes`` were added: ``notes`` from Python 3.11 on;
    none before."""
    return list(notes) if NOTES_KEPT else []


def notes_of(error: BaseException) -> list[str]:
    """``error``'s notes, none where it has no ``__notes__`` (any before Python 3.11)."""
    return list(getattr(error, "__notes__", []))


def add_note(error: BaseException, note: str) -> None:
    """``error.add_note(note)`` from Python 3.11 on; nothing before, as the product's guarded
    calls (a test that makes notes as the product would)."""
    if NOTES_KEPT:
        error.add_note(note)
