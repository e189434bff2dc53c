"""Under MPI a learning-rate factor set inside a step (after ``start_step``: in forward or
backward, from a rank's own loss) applies from the next step on, as ``set_lr_scale`` says: the
ranks compare the rate ``start_step`` posts, and the update read the optimizer's rate at
``finish_step``, so a factor set in between trained the step at a rate no rank compared and
the ranks' weights parted without a word (a factor of ``1 + rank`` mid-step, reset to a
shared one before each ``start_step``, was never refused). One rank here: what it trains at.
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.sync.mpi import SingleRankComm
from tests.mpi.common import bucket_params, bucket_sync, fire


def _step(sync, params, *factors):
    """One step of gradient 1 on each parameter; each of ``factors`` set after its
    ``start_step``."""
    sync.start_step(1)
    for factor in factors:
        sync.set_lr_scale(factor)
        assert sync.optimizer.lr == 0.5  # the step trains at the rate its check posted
    for p in reversed(params):
        fire(sync, p, 1.0)
    sync.finish_step()


def test_a_factor_set_inside_a_step_trains_the_next_step_not_this_one():
    sync, params = bucket_sync(comm=SingleRankComm()), bucket_params()  # SGD at lr 0.5
    sync.setup(params, {})
    try:
        with pytest.raises(ValueError, match="factor must be a finite number >= 0"):
            _step(sync, params, 4.0, float("nan"))  # refused inside a step too
        for p in reversed(params):  # the step goes on, at its posted rate
            fire(sync, p, 1.0)
        sync.finish_step()
        np.testing.assert_array_equal(params[0].value, np.arange(3.0) - 0.5)
        _step(sync, params)  # the next step's check posts 4 * 0.5
        np.testing.assert_array_equal(params[0].value, np.arange(3.0) - 0.5 - 2.0)
        sync.set_lr_scale(1.0)  # between steps: at once, as ever
        assert sync.optimizer.lr == 0.5
    finally:
        sync.close()
