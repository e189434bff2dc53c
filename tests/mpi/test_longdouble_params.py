"""Long double parameters under MPISync are summed by MPI (``MPI_LONG_DOUBLE``), not by hand
in float32 as 16-bit wires are: their updates keep long double's precision (or, on a float64
wire, float64's)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

LONG = np.dtype(np.longdouble)
needs_long = pytest.mark.skipif(
    LONG.itemsize <= 8, reason="long double is no wider than float64 on this platform"
)


def one_step(sync, grad: np.longdouble) -> np.ndarray:
    p = Parameter("w", np.zeros(5, np.longdouble))
    sync.setup([p], {})
    sync.start_step(1)
    p.grad[...] = grad
    p.inc_update(sync)
    sync.finish_step()
    return p.value


@needs_long
def test_one_rank_updates_a_long_double_parameter_as_a_single_process_does():
    third = np.longdouble(1) / 3
    expected = one_step(LocalSync(create_optimizer("sgd", lr=1.0)), third)
    got = one_step(MPISync(create_optimizer("sgd", lr=1.0), comm=SingleRankComm()), third)
    # before: -0.3333333432674407959, the float32 sum of a bucket reduced by hand
    assert got.tolist() == expected.tolist()


@needs_long
def test_a_float64_wire_carries_long_double_averages_rounded_to_float64_not_float32():
    sync = MPISync(create_optimizer("sgd", lr=1.0), comm=SingleRankComm(), grad_dtype="float64")
    p = Parameter("w", np.zeros(5, np.longdouble))
    sync.setup([p], {})
    sync.start_step(3)  # the sum 1 over 3 examples: the wire carries the average, 1/3
    p.grad[...] = 1
    p.inc_update(sync)
    sync.finish_step()
    # before: -0.3333333432674407959, the average scaled in float32 on its way to the wire
    assert p.value.tolist() == [np.longdouble(-np.float64(1) / 3)] * 5


@needs_long
@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_two_ranks_sum_long_double_gradients_in_long_double(overlap):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_longdouble_params.py"), overlap])
    assert proc.returncode == 0, proc.stderr
    got, exact = (np.longdouble(v) for v in proc.stdout.split())
    assert abs(got - exact) <= 4 * np.finfo(np.longdouble).eps * abs(exact), (got, exact)
