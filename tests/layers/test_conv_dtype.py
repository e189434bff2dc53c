"""Convolutions compute in ``result_type(input, weight)``, as fully connected layers do.

A float64-weight convolution fed float32 rounded its float64 weights to float32 products and
returned float32, where FullyConnected returns float64: so each kind of convolution here, fed a
float32 input, must give the outputs and gradients of the same layer fed that input cast to
float64, to float64 tolerance, and hand the input its gradient in the input's own dtype.
"""

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers.conv import (
    Conv2D,
    Conv3D,
    ConvProjection,
    ConvTranspose2D,
    ConvTranspose3D,
    ConvTransposeProjection,
)
from distconv.layers.fc import FullyConnected
from distconv.layers.mixed import Mixed
from distconv.layers.operator import ConvOperator

F32, F64 = np.float32, np.float64

LAYERS = {
    "conv2d": (lambda dt: Conv2D(2, 4, 3, padding=1, dtype=dt), (3, 2, 5, 6)),
    "conv2d_grouped_strided": (
        lambda dt: Conv2D(4, 6, 3, stride=2, dilation=1, groups=2, dtype=dt),
        (3, 4, 7, 7),
    ),
    "conv3d": (lambda dt: Conv3D(2, 3, 2, dtype=dt), (2, 2, 3, 4, 3)),
    "transpose2d": (lambda dt: ConvTranspose2D(2, 3, 3, stride=2, dtype=dt), (3, 2, 4, 3)),
    "transpose2d_grouped": (
        lambda dt: ConvTranspose2D(4, 2, 2, groups=2, output_padding=0, dtype=dt),
        (2, 4, 3, 3),
    ),
    "transpose3d": (lambda dt: ConvTranspose3D(2, 2, 2, dtype=dt), (2, 2, 2, 3, 2)),
    "projection": (
        lambda dt: Mixed([ConvProjection(2, 3, 3, padding=1, input_size=4, dtype=dt)], dtype=dt),
        (3, 2 * 16),
    ),
    "transpose_projection": (
        lambda dt: Mixed(
            [ConvTransposeProjection(2, 3, 2, stride=2, groups=1, input_size=3, dtype=dt)],
            dtype=dt,
        ),
        (3, 2 * 9),
    ),
}


def _seeded(layer, seed=1):
    rng = np.random.default_rng(seed)
    for p in layer.parameters():
        p.value[...] = rng.standard_normal(p.shape)
    return layer


def _run(layer, *inputs):
    """Output, input gradients and parameter gradients of one forward and backward."""
    for p in layer.parameters():
        p.grad[...] = 0
    y = layer(*inputs).value.copy()
    dy = np.random.default_rng(2).standard_normal(y.shape).astype(y.dtype)
    layer.output.grad = dy
    layer.backward(lambda p: None)
    grads = {p.name: p.grad.copy() for p in layer.parameters()}
    return y, [a.grad for a in inputs], grads


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_float32_input_float64_weight_computes_in_float64(kind):
    make, shape = LAYERS[kind]
    layer = _seeded(make(F64))
    x32 = np.random.default_rng(0).standard_normal(shape).astype(F32)
    y, (dx,), grads = _run(layer, Arg(x32))
    y_ref, (dx_ref,), grads_ref = _run(layer, Arg(x32.astype(F64)))
    assert y.dtype == F64  # as FullyConnected: result_type(float32, float64)
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
    assert dx.dtype == F32  # the input's gradient in the input's own dtype, as FC's
    np.testing.assert_allclose(dx, dx_ref.astype(F32), rtol=1e-6, atol=1e-6)
    for name, g in grads.items():
        assert g.dtype == F64
        np.testing.assert_allclose(g, grads_ref[name], rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.timeout(120)
def test_conv_operator_float32_images_float64_filters():
    op = ConvOperator(2, 3, 2, input_size=3)
    layer = Mixed([None, None], [op], dtype=F64)
    rng = np.random.default_rng(0)
    images = rng.standard_normal((3, 2 * 9)).astype(F32)
    filters = rng.standard_normal((3, op.filter_width))
    y, (gi, gf), _ = _run(layer, Arg(images), Arg(filters))
    y_ref, (gi_ref, gf_ref), _ = _run(layer, Arg(images.astype(F64)), Arg(filters))
    assert y.dtype == F64
    np.testing.assert_allclose(y, y_ref, rtol=1e-12, atol=1e-12)
    assert gi.dtype == F32 and gf.dtype == F64
    np.testing.assert_allclose(gi, gi_ref.astype(F32), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gf, gf_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cls", [ConvProjection, ConvTransposeProjection])
def test_gradient_check_passes_float64_conv_projection_on_float32_input(cls):
    layer = _seeded(Mixed([cls(2, 3, 2, input_size=3, dtype=F64)], bias=True, dtype=F64))
    x = Arg(np.random.default_rng(0).standard_normal((2, 2 * 9)).astype(F32))
    assert check_layer_grad(layer, [x]).worst <= 2e-2


@pytest.mark.timeout(120)
@pytest.mark.parametrize("narrow", ["float16", "bfloat16"])
def test_16_bit_input_float32_weight_matches_fully_connected(narrow):
    """A 16-bit input under float32 weights gives float32, as FullyConnected's product does."""
    if narrow == "bfloat16":
        narrow = pytest.importorskip("ml_dtypes").bfloat16
    x = np.random.default_rng(0).standard_normal((2, 2, 4, 4)).astype(narrow)
    fc = FullyConnected(32, 3)
    conv = _seeded(Conv2D(2, 3, 3))
    y = conv(Arg(x)).value
    assert y.dtype == fc(Arg(x)).value.dtype == F32
    ref = _seeded(Conv2D(2, 3, 3))(Arg(x.astype(F32))).value
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.timeout(120)
def test_float32_default_path_unchanged_and_not_copied(monkeypatch):
    """float32 input and weights: float32 output, and the kernel gets the arrays themselves."""
    import distconv.kernels.conv as kconv

    seen = []
    real = kconv.conv_forward

    def spy(x, w, *args, **kwargs):
        seen.append((x, w))
        return real(x, w, *args, **kwargs)

    monkeypatch.setattr(kconv, "conv_forward", spy)
    layer = _seeded(Conv2D(2, 3, 3))
    x = np.random.default_rng(0).standard_normal((2, 2, 5, 5)).astype(F32)
    y = layer(Arg(x)).value
    assert y.dtype == F32
    assert seen and seen[0][0] is x and seen[0][1] is layer.weight.value
    ref = _seeded(Conv2D(2, 3, 3, dtype=F64))(Arg(x.astype(F64))).value
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
