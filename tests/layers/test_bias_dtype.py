"""A bias is taken into its layer's output dtype, as a weight is: a float64 bias beside a
float32 weight (shared from a float32 layer) made a float32 output, the bias rounded into it in
place, where a Mixed layer takes every parameter into its output's dtype."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.kernels.bias import add_bias
from distconv.layers import Conv2D, FullyConnected, SelectiveFullyConnected, SequenceConcat

RNG = np.random.default_rng(7)


def _float64_bias(layer) -> np.ndarray:
    """Gives ``layer``'s float64 bias values float32 cannot hold; returns them."""
    layer.bias.value[...] = RNG.standard_normal(layer.bias.shape) / 3
    assert layer.bias.value.dtype == np.float64
    return layer.bias.value


@pytest.mark.parametrize("kind", ["shared", "unshared"])
def test_a_conv_adds_a_float64_bias_in_float64(kind):
    x = RNG.standard_normal((2, 2, 5, 5)).astype(np.float32)
    product = Conv2D(2, 3, 3, bias=False, input_size=(5, 5))
    layer = Conv2D(2, 3, 3, bias=kind, dtype=np.float64, weight=product.weight, input_size=(5, 5))
    b = _float64_bias(layer)
    y = layer.forward(Arg(x)).value
    want = product.forward(Arg(x)).value.astype(np.float64)
    want += b.reshape(1, -1, 1, 1) if kind == "shared" else b
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, want)


def test_a_fully_connected_layer_adds_a_float64_bias_in_float64():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    product = FullyConnected(6, 3, bias=False)
    layer = FullyConnected(6, 3, dtype=np.float64, weight=product.weight)
    b = _float64_bias(layer)
    y = layer.forward(Arg(x)).value
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, product.forward(Arg(x)).value.astype(np.float64) + b)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("method", ["dense", "sparse"])
def test_a_selective_layer_adds_a_float64_bias_in_float64_on_its_selected_columns(method):
    """The selected path added its gathered bias in place, as FullyConnected did before
    add_bias: a float64 bias beside a float32 weight came out float32 there, where the same
    layer fed no selection gives float64."""
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    cols = np.array([[0, 2], [1, 4], [3, 3], [4, 0]])
    product = FullyConnected(6, 5, bias=False)
    layer = SelectiveFullyConnected(6, 5, dtype=np.float64, weight=product.weight, method=method)
    b = _float64_bias(layer)
    y = layer(Arg(x), Arg(ids=cols)).value
    assert y.dtype == np.float64
    # the float32 products from the same method without a bias (einsum's sums may differ in
    # their last bits from matmul's), so the float64 bias is compared bit for bit in both:
    # atol 1e-6 against matmul's passed a bias rounded to float32 on the sparse path
    plain = SelectiveFullyConnected(6, 5, bias=False, weight=product.weight, method=method)
    products = plain(Arg(x), Arg(ids=cols)).value
    assert products.dtype == np.float32
    np.testing.assert_array_equal(y, products.astype(np.float64) + b[cols])


def test_a_sequence_concat_adds_a_float64_bias_in_float64():
    a = Arg(RNG.standard_normal((2, 3)).astype(np.float32), seq_starts=[0, 2])
    c = Arg(RNG.standard_normal((1, 3)).astype(np.float32), seq_starts=[0, 1])
    layer = SequenceConcat(3, bias=True, dtype=np.float64)
    b = _float64_bias(layer)
    y = layer(a, c).value
    assert y.dtype == np.float64
    rows = np.concatenate([a.value, c.value]).astype(np.float64)
    np.testing.assert_array_equal(y, rows + b)


def test_add_bias_adds_in_place_where_the_dtypes_agree():
    """The float32 path of every layer: no copy."""
    y = np.ones((2, 3), np.float32)
    assert add_bias(y, np.full(3, 0.5, np.float32)) is y
    np.testing.assert_array_equal(y, np.full((2, 3), 1.5, np.float32))
    wider = add_bias(y, np.full(3, 0.1, np.float64))
    assert wider.dtype == np.float64 and wider is not y
    np.testing.assert_array_equal(wider, 1.5 + np.full((2, 3), 0.1))
