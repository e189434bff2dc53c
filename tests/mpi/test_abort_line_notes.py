"""What a rank writes as it aborts the job on an error said in its abort line alone (an error
the user can act on: ``leaving.BRIEF_ERRORS``): a ``rank N: note: ...`` line for each line of
the notes the error carries, then the abort line, last, which the launcher still reads as the
rank's reason. (``tests/mpi/test_noted_abort.py`` aborts a real job so.)"""

from __future__ import annotations

import pytest

from distconv.checkpoint import CheckpointError
from distconv.notes import add_note
from distconv.sync.mpi import leaving
from distconv.sync.mpi.leaving import said_before_abort
from launcher.rank_reason import rank_reason


@pytest.fixture()
def refusals_brief(monkeypatch):
    """A refused checkpoint said in the abort line alone, as ``script_flags.refusals`` has it."""
    monkeypatch.setattr(leaving, "BRIEF_ERRORS", (CheckpointError,))
    monkeypatch.delenv("DISTCONV_DEBUG", raising=False)


def _raised_noted() -> CheckpointError:
    try:
        error = CheckpointError("no checkpoint in runs/x.")
        add_note(error, "resume from runs/y\n\n  or start anew with --overwrite")
        raise error
    except CheckpointError as raised:
        return raised


def test_the_notes_lead_the_abort_line_which_the_launcher_reads(refusals_brief):
    lines = said_before_abort(1, _raised_noted()).splitlines()
    why = "CheckpointError: no checkpoint in runs/x"
    assert lines == [
        "rank 1: note: resume from runs/y",
        "rank 1: note: or start anew with --overwrite",
        f"rank 1: {why}; aborting the MPI job",
    ]
    assert rank_reason([f"[1] {line}" for line in lines]) == (1, why)


def test_an_error_without_notes_is_the_abort_line_alone(refusals_brief):
    error = CheckpointError("no checkpoint in runs/x")
    said = said_before_abort(1, error)
    assert said == "rank 1: CheckpointError: no checkpoint in runs/x; aborting the MPI job\n"
