"""A convolution's gradients come in its forward's dtype, ``result_type(dy, x, w)``.

``conv_any_backward`` and ``per_sample_conv_backward`` cast ``dy``, ``x`` and ``w`` to their
common dtype before the kernels run, as their docstrings say. No test failed without those casts
(the forward's were enough for tests/layers/test_conv_dtype.py): the weight gradient then came
out in the weight's own dtype, a float64 input's gradient under float32 weights rounded to
float32, and a bfloat16 weight fed float32 activations (a convolution after a fully connected
layer in bfloat16 training, whose products are float32) had each pass's gradient rounded to
bfloat16 before it was added into the accumulated one: two roundings per pass where adding the
float32 gradient takes one.
"""

import numpy as np
import pytest

from distconv import Arg
from distconv.kernels.conv import conv_any_backward, conv_any_forward
from distconv.kernels.conv_per_sample import per_sample_conv_backward, per_sample_conv_forward
from distconv.kernels.shape import ConvGeometry
from distconv.layers.conv import Conv2D, ConvTranspose2D

F32, F64 = np.float32, np.float64
bfloat16 = pytest.importorskip("ml_dtypes").bfloat16

#: (input dtype, weight dtype): a wider input, and a narrower 16-bit weight
PAIRS = [(F64, F32), (F32, bfloat16)]
GEOM = ConvGeometry((3, 3), (1, 1), (1, 1), (1, 1), 1)


def _arrays(x_dtype, w_dtype, w_shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6, 6)).astype(x_dtype)
    return x, rng.standard_normal(w_shape).astype(w_dtype)


def _assert_close_to_float64(dw, dw_ref, common):
    """``dw`` against the float64 reference, at ``common``'s precision: in float64 rtol 1e-6
    passed a weight gradient rounded to a float32 weight's dtype (1e-7), the very rounding
    the module says the cast removes."""
    tol = 1e-12 if common == F64 else 1e-6
    np.testing.assert_allclose(dw, dw_ref.astype(common), rtol=tol, atol=tol)


def _check(x, w, y, dx, dw):
    """The forward's and both gradients' dtype, asserted to be ``result_type(x, w)``."""
    common = np.result_type(x.dtype, w.dtype)
    assert y.dtype == dx.dtype == dw.dtype == common
    return common


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize(("x_dtype", "w_dtype"), PAIRS)
def test_conv_any_backward_gives_the_forwards_dtype(x_dtype, w_dtype, transposed):
    x, w = _arrays(x_dtype, w_dtype, (4, 4, 3, 3))
    y = conv_any_forward(x, w, GEOM, transposed, (6, 6))
    dy = np.random.default_rng(1).standard_normal(y.shape).astype(y.dtype)
    dx, dw = conv_any_backward(dy, x, w, GEOM, transposed, True, True)
    common = _check(x, w, y, dx, dw)
    # against float64: the weight gradient is not rounded to the narrower operand's dtype
    wide = (a.astype(F64) for a in (dy, x, w))
    _, dw_ref = conv_any_backward(*wide, GEOM, transposed, False, True)
    _assert_close_to_float64(dw, dw_ref, common)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("x_dtype", "w_dtype"), PAIRS)
def test_per_sample_conv_backward_gives_the_forwards_dtype(x_dtype, w_dtype):
    x, w = _arrays(x_dtype, w_dtype, (2, 4, 4, 3, 3))  # one (O, C, *k) bank a sample
    y = per_sample_conv_forward(x, w, GEOM)
    dy = np.random.default_rng(1).standard_normal(y.shape).astype(y.dtype)
    dx, dw = per_sample_conv_backward(dy, x, w, GEOM, True, True)
    common = _check(x, w, y, dx, dw)
    _, dw_ref = per_sample_conv_backward(*(a.astype(F64) for a in (dy, x, w)), GEOM, False, True)
    _assert_close_to_float64(dw, dw_ref, common)


def _accumulate(layer, inputs):
    """The weight gradient after one backward per input, added up (gradient accumulation)."""
    layer.weight.grad[...] = 0
    for x in inputs:
        y = layer(Arg(x)).value
        layer.output.grad = np.random.default_rng(5).standard_normal(y.shape).astype(y.dtype)
        layer.backward(lambda p: None)
    return layer.weight.grad.copy()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cls", [Conv2D, ConvTranspose2D])
def test_bfloat16_weight_fed_float32_accumulates_rounding_once_per_pass(cls):
    rng = np.random.default_rng(0)
    layer = cls(8, 8, 3, padding=1, bias=None, dtype=bfloat16)
    layer.weight.value[...] = rng.standard_normal(layer.weight.shape).astype(bfloat16)
    inputs = [rng.standard_normal((4, 8, 6, 6)).astype(F32) for _ in range(2)]
    # the same weights in float32: each pass's float32 gradient, which the bfloat16 one adds
    twin = cls(8, 8, 3, padding=1, bias=None, dtype=F32)
    twin.weight.value[...] = layer.weight.value.astype(F32)
    want = np.zeros(layer.weight.shape, bfloat16)
    for x in inputs:
        want += _accumulate(twin, [x])  # float32 into bfloat16: one rounding
    np.testing.assert_array_equal(_accumulate(layer, inputs), want)
