"""A second fit after a step that failed on one rank alone (``run_refit_after_failed_alone.py``,
real ``mpiexec -n 2``) goes on from rank 0's parameters, as the refusals advise.

Rank 1, told of rank 0's failure at its next step's check, abandoned that step, which no rank
took (a check that fails fails on every rank it reaches). It still counted it among its
abandoned steps, so the refit's check saw the ranks differ and refused on both with a message
that showed no difference ("rank 0: comparing the job (setup's check) after 1 step, rank 1:
comparing the job (setup's check) after 1 step"), and the close that followed aborted the job.
"""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, assert_moved, run_two_ranks

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(120)
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_refit_after_a_step_failed_on_one_rank_goes_on_from_rank_0(tmp_path, overlap):
    run_two_ranks("run_refit_after_failed_alone.py", tmp_path, overlap)
    # rank 1 took step 0, rank 0 did not: the refit's broadcast gives both rank 0's values,
    # and the last step (gradients 1 and 2, lr 0.5) moves them by 0.75
    assert_moved(tmp_path, 0.75)
