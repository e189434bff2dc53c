"""``setup`` called while a step is open (no ``finish_step``, no ``abandon_step``).

Setup completed the step's check and stopped the thread but left the step itself open: the
sync stayed "in" the old step, so every later ``start_step`` was refused ("step 0 is
unfinished: call finish_step first"), for good; and the step's allreduce, still pending without
the thread on buffers that were the parameters' gradients, was neither completed nor matched.
Now setup abandons such a step first (as ``abandon_step``), so the second fit trains as after
an abandoned step (``tests/mpi/test_refit_after_abandon.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.sync.mpi import SingleRankComm
from tests.mpi.common import assert_moved, bucket_params, bucket_sync, mpiexec, run_two_ranks

#: the gradients' mean over two ranks (1 and 2) is 1.5; at lr 0.5 each value moves by 0.75
MOVED = 0.75


@pytest.mark.timeout(60)
@pytest.mark.parametrize("overlap", [False, True])
def test_one_rank_trains_after_a_setup_inside_a_step(overlap):
    params = bucket_params()
    sync = bucket_sync(comm=SingleRankComm(), overlap=overlap)
    try:
        sync.setup(params, {})
        sync.start_step(1)
        params[1].grad += 100.0
        sync(params[1])
        for p in params:
            p.zero_grad()
        sync.setup(params, {})
        sync.start_step(1)
        for p in reversed(params):
            p.grad += 1.0
            sync(p)
        sync.finish_step()
    finally:
        sync.close()
    for i, p in enumerate(params):
        np.testing.assert_array_equal(p.value, np.arange(3.0) + i - 0.5, err_msg=p.name)


@pytest.mark.mpi
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_two_ranks_train_after_a_setup_inside_a_step(tmp_path, overlap):
    run_two_ranks("run_mpi_abandon_setup_mid_step.py", tmp_path, overlap)
    assert_moved(tmp_path, MOVED)
