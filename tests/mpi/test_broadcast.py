"""``broadcast_parameters`` between steps over a real ``mpiexec -n 2``: every rank takes rank 0's
parameters, and a rank that broadcasts alone is named, not left to train on other parameters."""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def test_every_rank_takes_rank_0s_parameters_between_steps(tmp_path):
    proc = run_mpi(["-n", "2", *script("run_broadcast.py"), "all", str(tmp_path)], timeout=40)
    assert proc.returncode == 0, proc.stderr
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in (0, 1)]
    for name, value in ranks[0].items():
        if name.startswith("before/"):
            assert (value == 0.5).all(), name  # rank 0's, on every rank
        np.testing.assert_array_equal(ranks[1][name], value, err_msg=name)


def test_a_rank_that_broadcasts_alone_ends_the_job_naming_it(tmp_path):
    """Before, rank 0's broadcast returned at once (MPI sends small ones eagerly), rank 1 never
    received it, and the job ended with status 0, its ranks holding different parameters."""
    proc = run_mpi(["-n", "2", *script("run_broadcast.py"), "alone", str(tmp_path)], timeout=40)
    assert proc.returncode != 0, proc.stderr
    records = "\n".join(f.read_text() for f in sorted(tmp_path.glob("rank*.err")))
    said = (
        "ranks are at different points of the job (rank 0: broadcasting rank 0's parameters "
        "after 2 steps, rank 1: step 2); aborting the MPI job"
    )
    assert said in records, records
