"""A gradient replaced on a parameter that fired on another rank only fails ``finish_step``
before any parameter moves (``run_mpi_replaced_unfired.py``, real ``mpiexec -n 2``).

``finish_step`` checked, before its first update, only the gradients that fired on this rank
(``used.local``); one that fired elsewhere alone was found by ``Bucket.to_update`` when the
optimizer reached its bucket, after the buckets before it were updated: the failed step was
left partly applied (``b`` moved, ``a`` not). Now every gradient that fired on some rank (the
completed flags) is checked before the first update, with or without the thread.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(120)
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_gradient_replaced_where_it_never_fired_leaves_every_parameter_untouched(
    tmp_path, overlap
):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    command = [*script("run_mpi_replaced_unfired.py"), str(tmp_path), overlap]
    proc = run_mpi(["-n", "2", *command], 90)
    # rank 0's step failed alone once every collective of it completed (rank 1 finished it):
    # both close after one step, cleanly (before, rank 0's close aborted the job)
    assert proc.returncode == 0, proc.stderr
    finished = (tmp_path / "finish0.txt").read_text()
    assert finished.startswith("SyncError: the gradient of 'a' was replaced"), (
        finished,
        proc.stderr,
    )
    values = np.load(tmp_path / "finish0.npz")
    for i, name in enumerate("ab"):
        np.testing.assert_array_equal(values[name], np.arange(3.0) + i, err_msg=name)
