"""ContextProjection's learnt padding is a weight: it is read in ``result_type(input, weight)``.

Its forward cast the float64 padding to a float32 input's dtype before gathering the window, so
the float64 output of its Mixed layer held padding rounded to float32, where every other
projection (FullMatrix, DotMul, Scaling) computes in the result type.
"""

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers.context import ContextProjection
from distconv.layers.mixed import Mixed

F32, F64 = np.float32, np.float64
STARTS = np.array([0, 2, 6])


def _layer(dtype=F64):
    layer = Mixed([ContextProjection(3, 3, -1, trainable_padding=True, dtype=dtype)], dtype=dtype)
    rng = np.random.default_rng(1)
    for p in layer.parameters():
        p.value[...] = rng.standard_normal(p.shape)
    return layer


def _run(layer, x):
    layer.parameters()[0].grad[...] = 0
    arg = Arg(x, seq_starts=STARTS)
    y = layer(arg).value.copy()
    layer.output.grad = np.random.default_rng(2).standard_normal(y.shape).astype(y.dtype)
    layer.backward(lambda p: None)
    return y, arg.grad, layer.parameters()[0].grad.copy()


@pytest.mark.timeout(60)
def test_float64_padding_under_float32_input_is_not_rounded():
    layer = _layer()
    x32 = np.random.default_rng(0).standard_normal((6, 3)).astype(F32)
    y, dx, dw = _run(layer, x32)
    y_ref, dx_ref, dw_ref = _run(layer, x32.astype(F64))
    assert y.dtype == F64
    np.testing.assert_array_equal(y, y_ref)  # a gather: exactly the float64 reference
    pad = layer.parameters()[0].value
    np.testing.assert_array_equal(y[0, :3], pad[0])  # the first row's window starts in padding
    assert dx.dtype == F32
    np.testing.assert_array_equal(dx, dx_ref.astype(F32))
    np.testing.assert_array_equal(dw, dw_ref)


@pytest.mark.timeout(60)
def test_gradient_check_passes_on_float32_input():
    x = Arg(np.random.default_rng(0).standard_normal((6, 3)).astype(F32), seq_starts=STARTS)
    assert check_layer_grad(_layer(), [x]).worst <= 2e-2


@pytest.mark.timeout(60)
def test_float32_padding_under_float32_input_unchanged():
    layer = _layer(F32)
    y, dx, dw = _run(layer, np.random.default_rng(0).standard_normal((6, 3)).astype(F32))
    assert y.dtype == dx.dtype == dw.dtype == F32
    np.testing.assert_array_equal(y[0, :3], layer.parameters()[0].value[0])
