"""What an exception's notes hold on the Python a test runs under.

:func:`distconv.notes.add_note` keeps a note in ``__notes__`` on every Python the project
supports (``requires-python >= 3.10``). Before Python 3.11 it logs a note as it is made only
in an interactive session whose tracebacks show no notes, or while an MPI sync's abort hook is
open, which a test's own process never is: there the note is said where its error is
reported, and no test expects a log line of it.
"""

from __future__ import annotations

from distconv.notes import add_note, notes_of

__all__ = ["add_note", "notes_of"]
