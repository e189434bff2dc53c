"""2 ranks under a real ``mpiexec`` train an odd model as one process does on the whole batch.

Zero-element and scalar parameters, float32 and float64 mixed, a parameter that fires on one
rank or on none in a step, a rank without examples, a second setup (see
``run_odd_models.py``); with one bucket and with buckets smaller than one gradient, with
and without the communication thread, pieces of one element, and 16-bit wires over float64.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script
from tests.mpi.run_odd_models import train

pytestmark = NEEDS_MPIEXEC

#: pieces of 8 bytes (one element of float64), each going as its gradient fires
TINY_PIECES = {"piece_bytes": 8, "first_piece_bytes": 8, "last_piece_bytes": 8}


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "options, tolerance",
    [
        ({"overlap": False}, 0.0),
        ({"overlap": True, "bucket_bytes": 8}, 0.0),  # every gradient past its bucket's size
        ({"overlap": False, "bucket_bytes": 24, **TINY_PIECES}, 0.0),
        ({"overlap": True, "bucket_bytes": 16, **TINY_PIECES}, 0.0),
        ({"overlap": True, "grad_dtype": "float64", "bucket_bytes": 1}, 0.0),
        ({"overlap": True, "grad_dtype": "float16", "bucket_bytes": 8}, 1e-5),
        ({"overlap": False, "grad_dtype": "float16"}, 1e-5),
    ],
)
def test_an_odd_model_on_two_ranks_trains_as_one_process(tmp_path, options, tolerance):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    command = ["-n", "2", *script("run_odd_models.py"), str(tmp_path), json.dumps(options)]
    proc = run_mpi(command, timeout=90)
    assert proc.returncode == 0, proc.stderr
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]
    reference = LocalSync(create_optimizer("adam"))
    try:
        expected = train(reference)
    finally:
        reference.close()
    for name, value in expected.items():  # rank 1 started elsewhere: it ends on rank 0's run
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name], err_msg=name)
        np.testing.assert_allclose(ranks[0][name], value, rtol=0, atol=tolerance, err_msg=name)
        assert ranks[0][name].dtype == value.dtype and ranks[0][name].shape == value.shape
