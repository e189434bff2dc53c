"""``distconv.notes.add_note`` on the Python the suite runs under: the notes are kept in
``__notes__`` (PEP 678's attribute, which distconv's endings and a script's ``except`` read)
and reach the user when the error ends the process, on Python 3.10 too, where exceptions have
no ``add_note`` and the interpreter's traceback shows no notes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distconv.logs import interrupted_line
from distconv.notes import add_note, notes_of
from tests.child_env import child_env


def test_notes_are_kept_in_order_after_those_the_error_has():
    error = ValueError("no checkpoint here")
    error.__notes__ = ["a note of its own"]
    add_note(error, "the others were told")
    add_note(error, "and a second line\nof it")
    assert error.__notes__ == [
        "a note of its own",
        "the others were told",
        "and a second line\nof it",
    ]
    assert notes_of(error) == error.__notes__


def test_a_note_reaches_the_ending_of_an_interrupted_run():
    """``interrupted_line`` (the last lines of ``distconv train`` and ``run_main`` after a
    Ctrl-C) says each line of the notes made here: whether the other ranks were told."""
    interrupt = KeyboardInterrupt()
    add_note(interrupt, "this rank could not set up; the others were told")
    said = interrupted_line("prog", interrupt).splitlines()
    assert said == ["prog: interrupted", "prog: this rank could not set up; the others were told"]


def test_a_note_that_is_no_string_is_refused_and_nothing_is_added():
    error = RuntimeError("x")
    with pytest.raises(TypeError, match="note must be a str, not .int."):
        add_note(error, 42)  # type: ignore[arg-type]
    assert notes_of(error) == []


def test_notes_that_are_no_list_are_refused_not_replaced():
    error = RuntimeError("x")
    error.__notes__ = ("a script's", "tuple")
    with pytest.raises(TypeError, match="__notes__ is not a list"):
        add_note(error, "lost?")
    assert error.__notes__ == ("a script's", "tuple")


def test_notes_of_reads_them_as_the_traceback_does():
    """Only strings in a list: what a script set there by hand is passed over, not raised."""
    error = RuntimeError("x")
    assert notes_of(error) == []
    error.__notes__ = ["kept", 3, None, "kept too"]
    assert notes_of(error) == ["kept", "kept too"]
    error.__notes__ = "not a list"
    assert notes_of(error) == []


#: a script whose error, noted, ends it uncaught: Python's own hook prints what the user sees
UNCAUGHT = """\
from distconv.notes import add_note

error = ValueError("no checkpoint here")
add_note(error, "setup made its job check all the same, telling the other ranks")
raise error
"""


def test_the_note_of_an_error_that_ends_a_script_is_on_its_stderr(tmp_path):
    """A real interpreter ending on the noted error: from Python 3.11 its traceback shows the
    note; before, where it shows none, the note was logged as it was made. Either way the user
    reads it, after nothing else that says the error."""
    script = tmp_path / "uncaught.py"
    script.write_text(UNCAUGHT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=child_env(), timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert "ValueError: no checkpoint here" in done.stderr, done.stderr
    assert "setup made its job check all the same, telling the other ranks" in done.stderr
