"""A step the step check refuses in backward, as the step's first bucket is launched
(``run_check_refused_in_backward.py``, real ``mpiexec -n 2``): every rank that reaches the check
refuses it alike, before any gradient collective of the step, so close leaves with the other
ranks, not aborting the job, whether the refusal propagates through close (the README's
``finally: sync.close()``) or was caught before it. Before, the check's refusal in backward left
the step open, and close aborted every such job (exit 1, a traceback on every rank), a refusal
of rates that ``run_main`` says in one line included. A rank that closed while another is in
the step still ends the job, and none waits for ever."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = [pytest.mark.timeout(60), *NEEDS_MPIEXEC]

RATES = "the ranks' learning rates differ"
LAYOUT = "lay out gradient buckets differently"
FAILED = "rank 0: failed in finish_step of step 0"


def ran(tmp_path, mode: str, overlap: str, caught: str) -> tuple[int, str, list[str]]:
    """``run_check_refused_in_backward.py OUT MODE OVERLAP CAUGHT`` under ``mpiexec -n 2``: its
    status, its stderr, and what each rank's step raised."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    args = [str(tmp_path), mode, overlap, caught]
    proc = run_mpi(["-n", "2", *script("run_check_refused_in_backward.py"), *args], timeout=45)
    said = [(tmp_path / f"said{r}.txt").read_text() for r in (0, 1)]
    return proc.returncode, proc.stderr, said


@pytest.mark.parametrize(
    ("mode", "caught", "words"),
    [("rates", "0", RATES), ("rates", "1", RATES), ("layout", "1", LAYOUT)],
    ids=["rates propagating", "rates caught", "layout caught"],
)
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_step_the_check_refused_in_backward_closes_cleanly(
    tmp_path, mode, caught, words, overlap
):
    status, stderr, said = ran(tmp_path, mode, overlap, caught)
    assert status == 0, stderr[-3000:]  # no abort
    assert all(words in s for s in said), said
    closed = [(tmp_path / f"closed{r}.txt").read_text() for r in (0, 1)]
    assert closed == (["nothing"] * 2 if caught == "1" else said), closed  # the refusal's own


def test_a_rank_told_of_a_failed_step_in_backward_leaves_with_the_rank_that_failed(tmp_path):
    """Rank 0's finish_step failed on it alone; its next start_step tells rank 1, whose check
    of its next step refuses in backward: both close cleanly."""
    status, stderr, said = ran(tmp_path, "failed", "1", "1")
    assert status == 0, stderr[-3000:]
    assert FAILED in said[1], said


def test_a_rank_closed_while_another_is_in_the_step_still_ends_the_job(tmp_path):
    """The refusal reaches the closing rank in its close's last exchange, not in a step: it
    aborts the job, which ends, naming both, rather than leaving the other waiting."""
    status, stderr, said = ran(tmp_path, "closed", "1", "1")
    assert status != 0
    assert "rank 1: closed after 0 steps" in said[0], said
    assert said[1] == "nothing", said
