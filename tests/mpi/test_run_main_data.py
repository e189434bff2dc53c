"""A script run through ``dist.run_main`` under a real ``mpiexec -n 2`` (no ``-m mpi4py``) whose
data are wrong: every rank ends in one line, as under ``distconv train``, none in a traceback
(``tests/user_data_script.py``; alone in ``tests/test_run_main_user_errors.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from distconv.sync.errors import DATA_ADVICE
from distconv.sync.others_told import others_told
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(90)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

SCRIPT = str(Path(__file__).resolve().parents[1] / "user_data_script.py")
NAN = "the training set's 'x' holds NaN or infinity in 1 row(s): row 5"


def _ranks(*args: str, traceback: bool = False) -> tuple[int, list[str]]:
    done = run_mpi(["-n", "2", sys.executable, SCRIPT, *args], timeout=60)
    assert ("Traceback" in done.stderr) is traceback, done.stderr[-3000:]
    return done.returncode, done.stderr.splitlines()


def _told(rank: int) -> str:
    """The note line before a rank's error that says the others were told of it."""
    return f"user_data_script.py: note: {others_told(rank)}"


def test_data_every_rank_refuses_end_each_rank_in_one_line():
    """Both ranks refuse the set before setup, tell each other in the job check, close, and
    say the refusal, led by its note that the others were told: exit 1, no abort."""
    status, lines = _ranks("nan", "all")
    assert status == 1, lines
    assert sorted(lines) == sorted(
        [_told(0), _told(1)] + [f"user_data_script.py: error: DataError: {NAN}"] * 2
    ), lines
    # each rank's note names itself, and the other's error is its own: the note says that can be
    # (it said the other stopped naming this rank, which its own log contradicted)
    assert all(
        line.endswith("(a rank that failed as well names its own error)")
        for line in lines
        if ": note: " in line
    ), lines


def test_data_one_rank_refuses_end_it_in_one_line_and_the_other_naming_it():
    status, lines = _ranks("nan", "0")
    assert status == 1, lines
    assert sorted(lines) == [
        f"user_data_script.py: error: DataError: {NAN}",
        f"user_data_script.py: error: rank 0 could not set up: DataError: {NAN}",
        _told(0),
    ], lines


def test_a_model_error_on_one_rank_mid_epoch_aborts_the_job_in_one_line():
    """Rank 1's own layer fails in a step while rank 0 waits for it in the step's collectives,
    so its close aborts the job, saying why in its abort line alone (the traceback printed
    before it, as distconv train did not)."""
    status, lines = _ranks("model", "1")
    assert status != 0, lines
    said = [line for line in lines if not line.startswith("Abort(")]  # MPICH's own
    assert said == [f"rank 1{MODEL_ABORT}"], lines


def test_a_label_past_the_classes_on_every_rank_is_refused_before_any_step():
    """Every rank holds the bad label and refuses it alike before the first step (after the
    job check), each in one line: no rank waits in a step for another."""
    status, lines = _ranks("label", "all")
    assert status != 0, lines
    said = [line for line in lines if not line.startswith("Abort(")]  # MPICH's own
    assert said and all(LABEL in line and "Traceback" not in line for line in said), lines


def test_ranks_feeding_other_dtypes_are_told_the_difference_without_the_shard_advice():
    """One rank's images left float64: the same examples in the same order, so the advice for
    other examples ("load it with a fixed seed, and do not shard it by rank") would send the
    user to a fault the script does not have. The difference of the feeds alone is said."""
    status, lines = _ranks("float64", "1")
    assert status == 1, lines
    said = [line for line in lines if not line.startswith("Abort(")]  # MPICH's own
    assert len(said) == 2, lines
    for line in said:
        assert "run different jobs: train_data.feeds.x: [[1, 2, 2], 'float" in line, lines
        assert line.endswith("] there") and DATA_ADVICE not in line, lines


MODEL_ABORT = ": LayerError: Breaks 'fc': forward 6 failed; aborting the MPI job"
LABEL = "the training set's 'label' holds 1 row(s) outside [0, 3)"


def test_a_script_that_never_closes_its_sync_aborts_on_a_model_error_in_one_line(monkeypatch):
    """No ``finally: sync.close()``: the error reaches MPISync's abort hook, after run_main has
    put the brief errors back. The hook printed the whole traceback before its abort line; it
    says the line alone now, as the sync closed in a ``finally`` does."""
    monkeypatch.delenv("DISTCONV_DEBUG", raising=False)
    status, lines = _ranks("model", "1", "open")
    assert status != 0, lines
    said = [line for line in lines if not line.startswith("Abort(")]  # MPICH's own
    assert said == [f"rank 1{MODEL_ABORT}"], lines


def test_a_data_error_at_setup_left_to_the_hook_is_one_line_too(monkeypatch):
    """Rank 0 refuses its data at setup and tells rank 1 in the job check; its own error then
    goes to the hook, which aborts the job (rank 1's line may be cut short by it)."""
    monkeypatch.delenv("DISTCONV_DEBUG", raising=False)
    status, lines = _ranks("nan", "0", "open")
    assert status == 1, lines
    assert f"rank 0: DataError: {NAN}; aborting the MPI job" in lines, lines


def test_debug_keeps_the_hooks_traceback(monkeypatch):
    monkeypatch.setenv("DISTCONV_DEBUG", "1")
    status, lines = _ranks("model", "1", "open", traceback=True)
    assert status != 0, lines
    assert "distconv.layers.errors.LayerError: Breaks 'fc': forward 6 failed" in "\n".join(lines), (
        lines
    )
