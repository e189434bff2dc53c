"""16-bit gradients on the wire, under a real ``mpiexec -n 2``: half the bytes, close weights.

The bytes are counted from the buffers handed to MPI (:class:`CountingComm` wraps the real
communicator in ``run_train.py``), not from a counter MPISync keeps, so a cast down and back up
around a float32 allreduce would count as float32 and fail here.

Tolerance. SGD moves a weight by ``-lr * sum_t g_t``. On a 16-bit wire each averaged gradient is
rounded twice: each rank's share when it is cast (relative error <= u), and the float32 sum when
it is cast back (<= u), where u is the unit roundoff: 2**-11 for float16 (11-bit significand),
2**-8 for bfloat16 (8 bits). So the weights' error is about u times how far training moved them,
at most 2u while the steps do not reverse. Per parameter we check
``u/8 < max|w_wire - w_float32| / max|w_float32 - w_start| < 2u``; measured here about 0.55u for
both dtypes. The lower bound shows the rounding really happened at that precision: float16's
error (about 0.55 * 2**-11) is below bfloat16's lower bound, so a bfloat16 wire that carried
float16 would fail.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, params_of, run_ranks, small_lenet, weights

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: unit roundoff of each 16-bit wire dtype
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}


@pytest.fixture(scope="module")
def float32_run(tmp_path_factory) -> list[dict[str, np.ndarray]]:
    """2 ranks, SGD, float32 on the wire (the float64 model's gradients cast to float32)."""
    return run_ranks(tmp_path_factory.mktemp("float32"), "sgd", "--grad-dtype", "float32")[0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_wire_sends_half_the_bytes_and_stays_close(tmp_path, float32_run, dtype):
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    ranks = run_ranks(tmp_path, "sgd", "--grad-dtype", dtype)[0]
    for name in params_of(ranks[0]):  # the 16-bit sum is the same on every rank
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name])
    assert float(ranks[0]["_sent_bytes"]) * 2 == float(float32_run[0]["_sent_bytes"]) > 0
    full, start, u = params_of(float32_run[0]), weights(small_lenet(seed=0)), UNIT_ROUNDOFF[dtype]
    for name, value in params_of(ranks[0]).items():
        moved = np.abs(full[name] - start[name]).max()
        error = np.abs(value - full[name]).max() / moved
        assert u / 8 < error < 2 * u, (name, error / u)
