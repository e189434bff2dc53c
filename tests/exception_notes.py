"""What an exception's notes hold on the Python a test runs under.

:func:`distconv.notes.add_note` keeps a note in ``__notes__`` on every Python the project
supports (``requires-python >= 3.10``). Before Python 3.11 it logs a note as it is made only
in an interactive session whose tracebacks show no notes, or while an MPI sync's abort hook is
open, which a test's own process never is (:data:`NOTES_LOGGED`): there the note is said where
its error is reported.
"""

from __future__ import annotations

from distconv.notes import add_note, notes_of

__all__ = ["NOTES_LOGGED", "add_note", "notes_of"]

#: whether :func:`~distconv.notes.add_note` logs each note a test makes as it is made: never
#: (a test that expects a log line of it expects it ``NOTES_LOGGED`` times)
NOTES_LOGGED = False
