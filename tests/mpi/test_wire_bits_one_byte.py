"""A gradient's own 1-byte float (an ``ml_dtypes`` float8) on the wire: reduced by hand like a
16-bit one, and checked for NaN and infinity like one. 8a9fa2d's bit check viewed every such
wire as 16-bit: a float8 bucket failed with numpy's "Changing the dtype of a 0d array is only
supported if the itemsize is unchanged" where it had trained before; and clearing the sign
would pass ``float8_e4m3fnuz``'s NaN, whose bits are a negative zero's (0x80)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from tests.mpi.common import one_rank_step

ml_dtypes = pytest.importorskip("ml_dtypes", reason="float8 needs ml_dtypes")
FLOAT8 = ["float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"]


def float8_step(name: str, grad_bits: int, overlap: bool) -> Parameter:
    """One SGD step (learning rate 0.5) of four float8 values 1 on a world of one, each
    gradient the float8 of ``grad_bits``."""
    dtype = np.dtype(getattr(ml_dtypes, name))
    grad = np.full(4, grad_bits, np.uint8).view(dtype)
    sgd = create_optimizer("sgd", lr=0.5)
    return one_rank_step(Parameter("w", np.ones(4, dtype)), grad, optimizer=sgd, overlap=overlap)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("name", FLOAT8)
def test_a_float8_gradient_trains_over_the_wire(name, overlap):
    one = int(np.array(1.0, getattr(ml_dtypes, name)).view(np.uint8))
    value = float8_step(name, one, overlap).value
    np.testing.assert_array_equal(value.astype(np.float32), np.full(4, 0.5, np.float32))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("name", FLOAT8)
def test_a_float8_nan_is_refused_whatever_its_bits(name, overlap):
    nan = int(np.array(np.nan, getattr(ml_dtypes, name)).view(np.uint8))  # 0x80 for fnuz
    with pytest.raises(SyncError, match=r"bucket 0 \(w\).*not finite"):
        with np.errstate(invalid="ignore"):
            float8_step(name, nan, overlap)
