"""What MPISync says when it refuses a gradient."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm


def test_a_parameter_unfrozen_mid_step_is_not_called_one_never_given_to_setup():
    """``b`` was given to setup, frozen: it has no place in the buckets until the next
    start_step. Unfrozen inside a step and fired, it was refused as "not given to setup"."""
    a, b = Parameter("a", np.ones(3)), Parameter("b", np.ones(3))
    b.set_static(True)
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm())
    sync.setup([a, b], {})
    sync.start_step(1)
    b.set_static(False)
    with pytest.raises(SyncError, match="'b', frozen when this step's buckets were laid out"):
        sync.on_gradient(b)
    with pytest.raises(SyncError, match="'c', which was not given to setup"):
        sync.on_gradient(Parameter("c", np.ones(3)))
    with pytest.raises(SyncError, match="'a' arrived outside a step"):
        MPISync(create_optimizer("sgd"), comm=SingleRankComm()).on_gradient(a)
    sync.on_gradient(a)
    with pytest.raises(SyncError, match="parameter 'a' fired twice in step 0"):
        sync.on_gradient(a)


@pytest.mark.parametrize("value", [None, 0, 1.5])
def test_bucket_bytes_must_be_a_positive_integer_from_the_start(value):
    """None passed the check (a piece size may be None; a bucket size may not) and failed
    only in setup's layout, after the broadcasts, with a TypeError (with MPI, as an abort)."""
    with pytest.raises(ValueError, match=f"^bucket_bytes must be a positive integer, got {value}$"):
        MPISync(create_optimizer("sgd"), comm=SingleRankComm(), bucket_bytes=value)
