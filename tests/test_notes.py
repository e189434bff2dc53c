"""``distconv.notes.add_note`` on the Python the suite runs under: the notes are kept in
``__notes__`` (PEP 678's attribute, which distconv's endings and a script's ``except`` read)
and reach the user when the error ends the process, on Python 3.10 too, where exceptions have
no ``add_note`` and the interpreter's traceback shows no notes."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from distconv import notes
from distconv.logs import interrupted_line
from distconv.notes import add_note, notes_of, print_exception
from distconv.sync.mpi.leaving import install_abort_hook
from tests.child_env import child_env
from tests.mpi.common import AbortRecorder


@pytest.fixture()
def as_on_3_10(monkeypatch):
    """``add_note`` as before Python 3.11 (``__notes__`` by hand), whatever Python runs it."""
    monkeypatch.setattr(notes, "NATIVE_NOTES", False)


@pytest.fixture(params=["this python", "as before 3.11"])
def either_way(request, monkeypatch):
    """``add_note`` as the Python running it makes notes, and as before Python 3.11: the
    backport's refusals and order are checked where the suite runs on 3.11 too."""
    if request.param == "as before 3.11":
        monkeypatch.setattr(notes, "NATIVE_NOTES", False)


def test_notes_are_kept_in_order_after_those_the_error_has(either_way):
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


def test_a_note_that_is_no_string_is_refused_and_nothing_is_added(either_way):
    error = RuntimeError("x")
    with pytest.raises(TypeError, match="note must be a str, not .int."):
        add_note(error, 42)  # type: ignore[arg-type]
    assert notes_of(error) == []


def test_notes_that_are_no_list_are_refused_not_replaced(either_way):
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


def _run(
    tmp_path, script: str, *args: str, interpreter: tuple[str, ...] = (sys.executable,)
) -> subprocess.CompletedProcess:
    """``script``, written to a file, run by ``interpreter`` with ``args`` after its path."""
    path = tmp_path / "script.py"
    path.write_text(script)
    command = [*interpreter, str(path), *args]
    return subprocess.run(command, capture_output=True, text=True, env=child_env(), timeout=60)


def test_the_note_of_an_error_that_ends_a_script_is_under_its_traceback(tmp_path):
    """A real interpreter ending on the noted error: the note follows the error's line once,
    as Python 3.11's traceback shows it (before, said at exit, where the traceback shows
    none; it was logged as it was made, before the traceback, as a warning of its own)."""
    done = _run(tmp_path, UNCAUGHT)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.splitlines()
    note = "setup made its job check all the same, telling the other ranks"
    assert lines[-2:] == ["ValueError: no checkpoint here", note], done.stderr
    assert done.stderr.count(note) == 1, done.stderr


#: a script that catches a noted error and goes on (a fit tried again), and one that ends on
#: another error, raised from the noted one
CAUGHT = """\
from distconv.notes import add_note

try:
    error = ValueError("no checkpoint here")
    add_note(error, "the others were told")
    raise error
except ValueError:
    print("tried again")
try:
    try:
        raise OSError("disk full")
    except OSError as cause:
        add_note(cause, "a note of the cause")
        raise RuntimeError("saving failed") from cause
except RuntimeError as error:
    add_note(error, "a note of its own")
    raise
"""


def test_a_caught_errors_note_is_said_nowhere_and_a_chains_under_its_traceback(tmp_path):
    """The note of an error the script handled reaches nobody, as from Python 3.11 (before, a
    warning logged as it was made, the error never shown: "the others were told" out of the
    blue); the chain that ends the script says each error's notes once, after the tracebacks."""
    done = _run(tmp_path, CAUGHT)
    assert done.returncode == 1, done.stderr
    assert done.stdout == "tried again\n"
    assert "the others were told" not in done.stderr, done.stderr
    said = [line for line in done.stderr.splitlines() if "a note of" in line]
    assert said == ["a note of the cause", "a note of its own"], done.stderr
    assert done.stderr.index("a note of its own") > done.stderr.index("RuntimeError: saving")


def test_before_3_11_a_note_is_not_logged_as_it_is_made(as_on_3_10, caplog):
    """Logged as made, it was said where its error may be caught and handled, and said a
    second time in ``distconv train``'s and ``run_main``'s ending after a Ctrl-C."""
    interrupt = KeyboardInterrupt()
    with caplog.at_level(logging.WARNING):
        add_note(interrupt, "this rank could not set up; the others were told")
    assert caplog.records == []
    said = interrupted_line("prog", interrupt).splitlines()
    assert said == ["prog: interrupted", "prog: this rank could not set up; the others were told"]


def test_before_3_11_under_an_open_abort_hook_a_note_is_not_logged_as_it_is_made(
    as_on_3_10, caplog
):
    """Logged as made while an MPI sync's abort hook was open, a note warned of an error the
    script then handled and went on from (a fit tried again). The abort says the notes of the
    error it ends on instead (``tests/mpi/test_noted_abort.py``), as does a Ctrl-C's ending."""
    restore = install_abort_hook(AbortRecorder())
    try:
        interrupt = KeyboardInterrupt()
        with caplog.at_level(logging.WARNING):
            add_note(interrupt, "the others were not told")
    finally:
        restore()
    assert caplog.records == []
    assert notes_of(interrupt) == ["the others were not told"]
    assert interrupted_line("prog", interrupt).splitlines()[1:] == [
        "prog: the others were not told"
    ]
    assert list(notes._chain_notes(interrupt)) == ["the others were not told\n"]


def test_a_printed_traceback_says_the_notes_once(capsys):
    """``run_main``'s traceback of another rank's failure, and those printed before an MPI
    abort: the notes under it once, on 3.10 too (where pytest's ``exceptiongroup`` makes
    ``traceback`` print them already)."""
    try:
        error = ValueError("rank 1 failed")
        add_note(error, "the others were told")
        raise error
    except ValueError as raised:
        print_exception(raised)
    said = capsys.readouterr().err
    assert said.count("the others were told") == 1, said
    assert said.index("the others were told") > said.index("ValueError: rank 1 failed"), said


#: a script whose ``main`` ends on another rank's failure with a note, under ``run_main``
PEER_FAILED = """\
from distconv.notes import add_note
from distconv.script_main import run_main
from distconv.sync.peers import PeerFailed


def main():
    error = PeerFailed("rank 1 failed", [1])
    add_note(error, "moving the values written to the device failed too: MemoryError()")
    raise error


run_main(main)
"""


def test_run_mains_traceback_of_a_peer_failure_says_its_note(tmp_path):
    """``run_main`` prints another rank's failure itself (exit 75): its traceback ends with the
    note, on 3.10 too (a shard lost as the values went to the device: the second failure)."""
    done = _run(tmp_path, PEER_FAILED)
    assert done.returncode == 75, done.stderr
    lines = done.stderr.splitlines()
    note = "moving the values written to the device failed too: MemoryError()"
    assert lines[-2:] == ["distconv.sync.peers.PeerFailed: rank 1 failed", note], done.stderr


#: a script that handles one noted error, then ends on another; first importing the package
#: its argument names, where it has one, as a library imports it
HANDLED_THEN_UNCAUGHT = """\
import sys

if sys.argv[1:]:
    __import__(sys.argv[1])
from distconv.notes import add_note

try:
    error = ValueError("no checkpoint here")
    add_note(error, "the others " + "were told")  # not as the traceback quotes the line
    raise error
except ValueError:
    print("tried again")
error = RuntimeError("saving failed")
add_note(error, "a note " + "of its own")
raise error
"""


def _said_once_at_the_end(done: subprocess.CompletedProcess) -> None:
    """``done`` ended on :data:`HANDLED_THEN_UNCAUGHT`'s last error: its note said once, under
    it, and the handled error's note nowhere."""
    said = done.stdout + done.stderr
    assert "the others were told" not in said, said
    assert said.count("a note of its own") == 1, said
    assert said.index("a note of its own") > said.index("RuntimeError"), said


@pytest.mark.parametrize("package", ["IPython", "exceptiongroup"])
def test_a_script_that_imports_a_package_says_each_note_once(tmp_path, package):
    """IPython imported in a plain script runs no shell: a note is said under the traceback,
    and a handled error's nowhere (before Python 3.11 both were logged as made). Under the hook
    exceptiongroup installs before Python 3.11 (IPython's import brings it too), which prints
    notes, they are not said again at exit."""
    pytest.importorskip(package)
    done = _run(tmp_path, HANDLED_THEN_UNCAUGHT, package)
    assert done.returncode == 1, done.stderr
    _said_once_at_the_end(done)


def test_an_ipython_shell_that_shows_notes_says_each_once(tmp_path):
    """IPython from 8.14 shows an error's notes under its traceback on every Python: a note
    is not logged as made there too (before Python 3.11, said twice, and a handled error's
    out of the blue)."""
    pytest.importorskip("IPython", minversion="8.14")
    ipython = (sys.executable, "-m", "IPython", "--no-banner", "--colors=NoColor")
    done = _run(tmp_path, HANDLED_THEN_UNCAUGHT, interpreter=ipython)
    _said_once_at_the_end(done)
