"""What ``abandon_step`` hands back on a world of one (the two-rank cases:
``test_refit_after_abandon.py``): each parameter's gradient as an array of its own, the buckets'
buffers left to MPI."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync, SingleRankComm


@pytest.mark.timeout(60)
@pytest.mark.parametrize("overlap", [False, True])
def test_a_step_abandoned_after_a_parameter_was_frozen_in_it_lets_go_of_the_rest(overlap):
    """Frozen mid-step, a parameter has no gradient: abandon_step must hand back the others'."""
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), overlap=overlap)
    params = [Parameter(n, np.arange(3.0)) for n in "ab"]
    try:
        sync.setup(params, {})
        sync.start_step(1)
        params[1].grad += 2.0
        params[1].inc_update(sync)
        params[0].set_static()
        sync.abandon_step()
        assert params[0].grad is None
        assert all(params[1].grad is not v for b in sync.buckets for v in b.views)
        np.testing.assert_array_equal(params[1].grad, [2.0, 2.0, 2.0])
    finally:
        sync.close()
