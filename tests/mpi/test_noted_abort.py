"""A rank that aborts an MPI job on a noted error (PEP 678: ``add_note``) says the note, once,
where it says the error: under the traceback it prints (Python 3.10's prints none, and the
abort ends the process before the interpreter's exit could say them), or, where it says the
error in its abort line alone, on a ``rank N: note: ...`` line before that line (which dropped
it on every Python). A note of an error the rank handled and went on from is said nowhere
(before Python 3.11 it was logged as it was made while the abort hook was open).

``run_noted_abort.py`` imports nothing of the tests, so on Python 3.10 its ranks print as a
user's do: ``exceptiongroup`` (which pytest imports) is not there to print the notes."""

from __future__ import annotations

import json
import sys

import pytest

from tests.mpi.common import HERE, NEEDS_MPIEXEC, run_mpi

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: the notes ``run_noted_abort.py`` puts on the error it handles and on the one it ends on
HANDLED_NOTE = "the handled error's note"
ENDING_NOTE = "the way out: raise --timeout if the shard is only slow"
#: the line of the error it ends on, in a traceback
ERROR = "RuntimeError: rank 1 fails on purpose"


def _aborted(how: str) -> list[str]:
    """The lines of stderr of ``mpiexec -n 2 run_noted_abort.py HOW``, which must end in an
    abort, and which say the handled error's note nowhere and the ending one once."""
    done = run_mpi(["-n", "2", sys.executable, str(HERE / "run_noted_abort.py"), how])
    assert done.returncode == 1, done.stderr[-3000:]
    assert HANDLED_NOTE not in done.stderr, done.stderr[-3000:]
    assert done.stderr.count(ENDING_NOTE) == 1, done.stderr[-3000:]
    return done.stderr.splitlines()


@pytest.mark.parametrize("how", ["closed", "uncaught", "logged"])
def test_the_note_follows_the_traceback_of_the_error_a_rank_aborts_on(how):
    """Closed in a ``finally`` (``abort_job``) or left to the exception hook (which prints it
    itself, or hands it to the script's own hook: a logger's), the error's traceback, then its
    note, as Python 3.11 prints them (and in ``abort_job``'s case the line that says why,
    last)."""
    lines = _aborted(how)
    assert lines[lines.index(ERROR) + 1] == ENDING_NOTE, lines


def test_an_abort_line_said_alone_is_led_by_the_errors_note():
    """A refused checkpoint under ``refusals`` is said in the abort line alone, as ``distconv
    train`` says an error the user can act on: its note, the way out, was lost with the
    traceback on every Python."""
    lines = _aborted("brief")
    reason = "rank 1: CheckpointError: no checkpoint in runs/x; aborting the MPI job"
    assert lines[lines.index(reason) - 1] == f"rank 1: note: {ENDING_NOTE}", lines


def test_under_a_json_log_the_note_a_loggers_hook_left_out_is_a_json_object():
    """Under ``--log-format json`` the script's hook logs the error as one JSON object: the
    note it left out (Python 3.10's) was written after it as a raw line, the one line of the
    log a collector could not parse; it is an object of its own, as the log's lines are."""
    said = [line for line in _aborted("logged_json") if ENDING_NOTE in line]
    assert len(said) == 1 and json.loads(said[0])["level"] == "error", said
