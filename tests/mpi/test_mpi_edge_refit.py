"""A second fit after a step every rank abandoned with a bucket on the wire.

``Trainer.fit`` zeroes the gradients, then sets the sync up again. The abandoned step's
allreduce was still pending on the gradient buffers: setup's own collectives moved it on, MPI
wrote the ranks' sum over the zeroed gradients, and setup's new buckets took that in, so the
next step added the abandoned step's gradients (on every rank alike: no error, a wrong step).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(120)
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_second_fit_after_an_abandoned_step_trains_on_zeroed_gradients(tmp_path, overlap):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    command = ["-n", "2", *script("run_mpi_edge_refit.py"), str(tmp_path), overlap]
    proc = run_mpi(command, timeout=90)
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):  # the gradients' mean over the ranks, 1.5, at lr 0.5
        values = np.load(tmp_path / f"values{rank}.npz")
        for i, name in enumerate("ab"):
            np.testing.assert_allclose(values[name], np.arange(3.0) + i - 0.75, err_msg=name)
