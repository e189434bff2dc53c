"""An integer output gradient set by hand reads as the same float gradient."""

import numpy as np
import pytest

from distconv import Arg
from distconv.layers import (
    AvgPool2D,
    Conv2D,
    ConvTranspose2D,
    FullyConnected,
    MaxPool2D,
    MSELoss,
)

LAYERS = {
    # a convolution computed its input gradient in the gradient's type: products truncated to
    # integers, silently; a transposed one failed in matmul (UFuncTypeError); an average
    # pooling's shares 1/9 came out 0, and its input gradient became int64
    "conv": (lambda: Conv2D(2, 3, 3, padding=1), (2, 2, 5, 5)),
    "conv wide": (lambda: Conv2D(2, 3, 3, padding=1), (1, 2, 30, 30)),
    "transposed": (lambda: ConvTranspose2D(2, 3, 3, stride=2), (2, 2, 4, 4)),
    "avg pool": (lambda: AvgPool2D(3, 1, 1), (2, 2, 4, 4)),
    "max pool": (lambda: MaxPool2D(2), (2, 2, 4, 4)),
    "fc": (lambda: FullyConnected(8, 3, act="tanh"), (2, 8)),
}


@pytest.mark.parametrize("kind", [np.int64, np.int8, bool])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_an_integer_output_gradient_gives_the_float_ones_gradients(rng, name, kind):
    make, shape = LAYERS[name]
    layer = make()
    x = rng.standard_normal(shape).astype(np.float32)
    grads = []
    for dtype in (np.float32, kind):
        for p in layer.parameters():
            p.zero_grad()
        arg = Arg(x.copy())
        y = layer(arg)
        y.grad = (np.arange(y.value.size).reshape(y.shape) % 3 == 1).astype(dtype)
        layer.backward(lambda p: None)
        grads.append([arg.grad] + [p.grad.copy() for p in layer.parameters()])
    want, got = grads
    assert got[0].dtype == np.float32
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def test_a_loss_seeded_with_a_python_int_still_works(rng):
    pred = Arg(rng.standard_normal((2, 3)))
    loss = MSELoss()
    out = loss(pred, Arg(np.zeros((2, 3)), needs_grad=False))
    out.grad = 1
    loss.backward(lambda p: None)
    np.testing.assert_allclose(pred.grad, 2 * pred.value / 6, rtol=1e-12)
