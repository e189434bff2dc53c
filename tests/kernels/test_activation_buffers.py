"""Sigmoid and softmax computed in one buffer: exact where the two-branch forms were, at every
magnitude and width, and written into ``z`` when the layer gives it away (``inplace``)."""

import warnings

import ml_dtypes
import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.kernels.activation import Sigmoid, Softmax
from distconv.layers import Activation, FullyConnected

#: every magnitude: exp(-z) overflows float32 below -88, float64 below -709
EXTREMES = np.array([-1e4, -800, -710, -100, -89, -20, -1, -0.0, 0.0, 1e-8, 1, 20, 89, 800, 1e4])


def _reference(z: np.ndarray) -> np.ndarray:
    """Sigmoid in long double, rounded once to ``z``'s type."""
    wide = z.astype(np.longdouble)
    return (1 / (1 + np.exp(-wide))).astype(z.dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_is_within_two_ulps_of_long_double_at_every_magnitude(dtype):
    z = np.concatenate([EXTREMES, np.linspace(-30, 30, 2001)]).astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exp(-z)'s overflow is meant, and silent
        y = Sigmoid().forward(z)
    ref = _reference(z)
    tiny = np.finfo(dtype).tiny  # below it the answer may flush to 0 (sigmoid(-100) in float32)
    close = np.abs(y - ref) <= 2 * np.spacing(ref) + tiny
    assert close.all(), (z[~close], y[~close], ref[~close])
    assert y.dtype == dtype and ((y >= 0) & (y <= 1)).all()


def test_sigmoid_of_infinities_and_nan_is_the_limit_and_nan():
    y = Sigmoid().forward(np.array([-np.inf, np.inf, np.nan], dtype=np.float32))
    np.testing.assert_array_equal(y, [0, 1, np.nan])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_16_bit_sigmoid_is_float32s_rounded_not_lost_to_an_overflow(dtype):
    """float16's exp(12) overflows: computed in float16, sigmoid(-12) would be 0, not 6e-6."""
    z = np.array([-60000, -100, -15, -12, -1, 0, 1, 12, 60000]).astype(dtype)
    y = Sigmoid().forward(z)
    assert y.dtype == z.dtype
    np.testing.assert_array_equal(y, Sigmoid().forward(z.astype(np.float32)).astype(dtype))
    assert y[3] > 0


def test_sigmoid_backward_has_the_type_and_value_of_dy_times_y_times_one_minus_y(rng):
    y = Sigmoid().forward(rng.standard_normal((3, 5)).astype(np.float32))
    dy = rng.standard_normal((3, 5))  # float64: the product is float64, as dy * y was
    g = Sigmoid().backward(y, dy)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, dy * y * (1 - y), rtol=1e-6)
    assert Sigmoid().backward(y, 2.0).dtype == np.float32  # a number keeps y's type
    zero_d = Sigmoid().forward(np.array(0.0, dtype=np.float32))  # an Arg's 0-d value
    assert zero_d.shape == () and float(Sigmoid().backward(zero_d, 1.0)) == 0.25


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_a_16_bit_sigmoid_gradient_is_float32s_rounded_once(rng, dtype):
    """As the forward: three products rounded to 16 bits each were up to 2 ulps off."""
    y = Sigmoid().forward((rng.standard_normal(4096) * 3).astype(dtype))
    dy = rng.standard_normal(4096).astype(dtype)
    g = Sigmoid().backward(y, dy)
    assert g.dtype == dtype
    wide = y.astype(np.float32)
    np.testing.assert_array_equal(g, ((1 - wide) * wide * dy.astype(np.float32)).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32])
@pytest.mark.parametrize("inplace", [False, True])
def test_a_numpy_scalar_has_the_sigmoid_of_its_0_d_array(dtype, inplace):
    """A 16-bit loss's value is a numpy scalar: its float32 copy is one too, which ``out=``
    refused ("return arrays must be of ArrayType") where the old sigmoid took it."""
    z = dtype(-1.5)
    y = Sigmoid().forward(z, inplace=inplace)
    np.testing.assert_array_equal(y, Sigmoid().forward(np.array(z)))
    assert y.dtype == np.dtype(dtype)
    g = Sigmoid().backward(dtype(y), dtype(2.0))
    assert g.dtype == np.dtype(dtype) and g == Sigmoid().backward(np.array(y), np.array(2.0, dtype))


@pytest.mark.parametrize("act", [Sigmoid(), Softmax()], ids=repr)
def test_in_place_writes_into_z_and_otherwise_leaves_it(rng, act):
    z = rng.standard_normal((4, 6)).astype(np.float32)
    kept = z.copy()
    y = act.forward(z)
    np.testing.assert_array_equal(z, kept)
    assert not np.shares_memory(y, z)
    y_in_place = act.forward(z, inplace=True)
    assert np.shares_memory(y_in_place, z)  # no output-sized buffer of its own
    np.testing.assert_array_equal(y_in_place, y)


@pytest.mark.parametrize("act", [Sigmoid(), Softmax()], ids=repr)
def test_a_16_bit_z_given_away_is_left_as_it_was(rng, act):
    """A 16-bit ``z`` is computed in a float32 copy: it is not written, even in place."""
    z = rng.standard_normal((4, 6)).astype(np.float16)
    kept = z.copy()
    y = act.forward(z, inplace=True)
    np.testing.assert_array_equal(z, kept)
    assert y.dtype == np.float16


@pytest.mark.parametrize("act", ["sigmoid", "softmax"])
def test_a_layer_that_gives_its_product_away_still_has_the_right_gradient(rng, act):
    """FullyConnected lets its activation run in place of its product."""
    x = Arg(rng.standard_normal((5, 7)) * 4, needs_grad=True)  # large logits, saturated units
    check_layer_grad(FullyConnected(7, 6, act=act), [x])


def test_softmax_of_large_logits_and_its_gradient_are_right(rng):
    z = rng.standard_normal((3, 9)) * 300  # exp(300) overflows without the shift
    y = Softmax().forward(z)
    ref = np.exp(z.astype(np.longdouble) - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, (ref / ref.sum(axis=1, keepdims=True)).astype(float), rtol=1e-12)
    check_layer_grad(Activation("softmax"), [Arg(rng.standard_normal((3, 9)) * 5, needs_grad=True)])
