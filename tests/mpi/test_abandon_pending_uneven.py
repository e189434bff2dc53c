"""A second fit after a step the ranks abandoned at different points (a layer raising on one
rank before any gradient fired, on the other after its first bucket went): the rank that sent
was left with an allreduce no other rank would ever match.

With the communication thread, the thread waited in it and the second setup gave up after
30 s ("the communication thread did not stop"), aborting the job; without it, the request was
dropped pending, its buffer freed under MPI. Setup now sends the rest of the abandoned step on
every rank, so every piece completes, and the second fit trains as the first would have.
"""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, assert_moved, run_two_ranks

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(120)
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_second_fit_after_an_unevenly_abandoned_step_leaves_nothing_pending(tmp_path, overlap):
    run_two_ranks("run_abandon_pending_uneven.py", tmp_path, overlap)
    for rank in (0, 1):
        assert float((tmp_path / f"setup{rank}.txt").read_text()) < 10.0
        assert (tmp_path / f"pending{rank}.txt").read_text().strip() == "False"
    assert_moved(tmp_path, 0.75)  # the gradients' mean over the ranks, 1.5, at lr 0.5
