"""Tanh's gradient in 16 bits: ``dy * (1 - y * y)`` taken in float32 and rounded once, as
sigmoid's, where in 16 bits ``1 - y * y`` cancelled near 1 and -1 (up to 16 float16 ulps)."""

import ml_dtypes
import numpy as np
import pytest

from distconv.kernels.activation import Tanh


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_a_16_bit_tanh_gradient_is_within_an_ulp_of_the_exact_one(rng, dtype):
    """Within one ulp of the gradient of the same ``y`` and ``dy`` taken in float64, as
    PyTorch's is (correctly rounded); units near saturation, where ``y * y`` nears 1, are
    where a 16-bit product lost most of its digits."""
    y = Tanh().forward((rng.standard_normal(4096) * 2).astype(dtype))
    dy = rng.standard_normal(4096).astype(dtype)
    g = Tanh().backward(y, dy)
    assert g.dtype == dtype
    exact = dy.astype(np.float64) * (1 - y.astype(np.float64) ** 2)
    eps = float(ml_dtypes.finfo(dtype).eps)
    np.testing.assert_allclose(g.astype(np.float64), exact, rtol=eps, atol=eps * 2.0**-14)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_a_16_bit_0_d_unit_with_a_number_as_its_gradient_is_rounded_once(dtype):
    """A 0-d output's tanh is a numpy scalar, and Arg.grad takes a number for its gradient:
    the float32 path takes both, and rounds once."""
    y = Tanh().forward(np.array(0.5, dtype))
    g = Tanh().backward(y, 2.0)
    assert np.dtype(g.dtype) == np.dtype(dtype)
    assert float(g) == float(dtype(2.0 * (1 - float(y) ** 2)))
