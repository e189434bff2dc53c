"""What an exception's notes hold on the Python a test runs under.

:func:`distconv.notes.add_note` keeps a note in ``__notes__`` on every Python the project
supports (``requires-python >= 3.10``); before Python 3.11, where the interpreter prints no
notes under a traceback, it also logs each as it is made (:data:`NOTES_LOGGED`), so a test
that reads what was logged or said expects that line once more there.
"""

from __future__ import annotations

from distconv.notes import NATIVE_NOTES, add_note, notes_of

__all__ = ["NOTES_LOGGED", "add_note", "notes_of"]

#: whether :func:`~distconv.notes.add_note` logs each note as it is made (before Python 3.11)
NOTES_LOGGED = not NATIVE_NOTES
