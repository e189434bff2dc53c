"""A 16-bit step refused on its last bucket leaves every parameter as it was.

With the communication thread each bucket was updated as soon as it was reduced, so a float16
wire that overflowed in a later bucket raised only after the earlier buckets' parameters had
taken the step: the step failed half-applied (on every rank alike), and a second fit trained on
from parameters of which some had moved and some had not. Now no bucket is updated before every
16-bit bucket has passed its check (docs/architecture.md, "Allreduce over MPI").
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm


@pytest.mark.timeout(60)
@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("grad_dtype", ["float16", "bfloat16"])
def test_a_refused_16_bit_bucket_leaves_every_parameter_untouched(overlap, grad_dtype):
    if grad_dtype == "bfloat16":
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
    # three parameters of 3 float64 elements, a bucket each (24 bytes): 'c' is laid out first
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("abc")]
    start = [p.value.copy() for p in params]
    sync = MPISync(
        create_optimizer("sgd", lr=0.5),
        comm=SingleRankComm(),
        bucket_bytes=24,
        grad_dtype=grad_dtype,
        overlap=overlap,
    )
    sync.setup(params, {})
    try:
        sync.start_step(1)
        # 'c' and 'b' (the first buckets) are fine; 'a' (the last) is NaN: refused on any wire
        for p, grad in zip(reversed(params), [1.0, 2.0, np.nan]):
            p.grad += grad
            sync(p)
        with pytest.raises(SyncError, match=r"bucket 2 \(a\).*not finite"):
            sync.finish_step()
        for p, value in zip(params, start):
            np.testing.assert_array_equal(p.value, value, err_msg=p.name)
    finally:
        sync.abandon_step()
        try:
            sync.close()
        except SyncError:
            pass
