"""A bucket that fails to pack in ``finish_step`` on one rank alone (its parameters fired on no
rank, so it goes at the step's end): the other ranks waited for its pieces, never sent, until
that rank's close aborted the job or the watchdog stopped it."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, assert_moved, run_two_ranks

pytestmark = pytest.mark.timeout(120)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("wire", [[], ["float16"]], ids=["native", "float16"])
def test_a_pack_failing_on_one_rank_refuses_the_step_on_every_rank(tmp_path, overlap, wire):
    """Every rank refuses the step, none updates (rank 0 naming its own error, rank 1 that
    another rank's finish_step failed), and the refit that follows trains on alike."""
    run_two_ranks("run_pack_failure.py", tmp_path, overlap, *wire)
    said = [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]
    assert said[0] == "RuntimeError: copying bucket 1 to the host failed", said
    assert said[1].startswith("SyncError: another rank's finish_step failed"), said
    assert_moved(tmp_path, 0.75)  # the last step alone: (1 + 2) / 2 examples * lr 0.5
