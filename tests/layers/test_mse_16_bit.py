"""MSELoss's gradient in 16 bits: its scale ``2 / size`` is taken in float32, so a float16
batch of more than 65504 elements still trains, and each gradient is float32's rounded once."""

import ml_dtypes
import numpy as np
import pytest

from distconv import Arg
from distconv.layers import MSELoss


def _gradient(pred: np.ndarray) -> np.ndarray:
    """``d(mean((pred - 0)^2)) / d(pred)`` from a forward and a backward of seed 1."""
    layer, x = MSELoss(), Arg(pred, needs_grad=True)
    loss = layer(x, Arg(np.zeros_like(pred))).value
    layer.output.grad = np.ones((), loss.dtype)
    layer.backward(lambda p: None)
    return x.grad


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(3, 1000), (64, 1025)], ids=["3000", "65600"])
def test_a_16_bit_gradient_is_float32s_rounded_once(rng, dtype, shape):
    """A target of zeros: the difference is the prediction itself, exact in any type, so the
    16-bit gradient is the float32 one rounded once. The 16-bit scale was inf for float16 past
    65504 elements (every gradient 0), and rounded first otherwise."""
    pred = rng.standard_normal(shape).astype(dtype)
    half, single = _gradient(pred), _gradient(pred.astype(np.float32))
    assert half.dtype == dtype and half.any()
    np.testing.assert_array_equal(half, single.astype(dtype))
