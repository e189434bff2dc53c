"""Byte sizes given to MPISync: numpy integers are integers, a bool is none.

``np.int64(1 << 20)`` (a size worked out with numpy) was refused as "must be a positive integer,
got 1048576", and ``True`` (a flag in the wrong place) taken as a bucket of one byte.
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync, SingleRankComm

SIZES = ("bucket_bytes", "piece_bytes", "first_piece_bytes", "last_piece_bytes")


def trained(**sizes) -> tuple[MPISync, np.ndarray]:
    """One SGD step of one parameter on a world of one, with ``sizes``."""
    sync = MPISync(create_optimizer("sgd", lr=0.5), comm=SingleRankComm(), **sizes)
    param = Parameter("w", np.arange(4.0))
    try:
        sync.setup([param], {})
        sync.start_step(2)
        param.grad += 1.0
        param.inc_update(sync)
        sync.finish_step()
    finally:
        sync.close()
    return sync, param.value


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", SIZES)
def test_a_numpy_integer_size_is_taken_as_the_same_int(name):
    sync, value = trained(**{name: np.int64(16)})
    np.testing.assert_array_equal(value, np.arange(4.0) - 0.25)
    assert all(type(v) is int for v in [sync.bucket_bytes, *sync.piece_sizes])
    assert 16 in [sync.bucket_bytes, *sync.piece_sizes]


@pytest.mark.parametrize("name", SIZES)
@pytest.mark.parametrize("flag", [True, np.bool_(True)])
def test_a_bool_is_no_size(name, flag):
    with pytest.raises(ValueError, match=f"^{name} must be a positive integer, got (np.)?True"):
        MPISync(create_optimizer("sgd"), comm=SingleRankComm(), **{name: flag})
