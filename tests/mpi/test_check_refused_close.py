"""A step the step check refuses in ``finish_step`` on every rank (``run_check_refused_close.py``,
real ``mpiexec -n 2``): the refusal comes at the step's first collective, with nothing else of
the step started on any rank, yet close aborted the job, the step still open. It leaves with the
other ranks now."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_two_ranks

pytestmark = pytest.mark.timeout(60)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_step_the_check_refused_in_finish_step_closes_cleanly(tmp_path, overlap):
    run_two_ranks("run_check_refused_close.py", tmp_path, overlap)  # exits 0: no abort
    for rank in (0, 1):
        said = (tmp_path / f"said{rank}.txt").read_text()
        assert "lay out gradient buckets differently" in said, said
    assert not list(tmp_path.glob("rank*.err"))
