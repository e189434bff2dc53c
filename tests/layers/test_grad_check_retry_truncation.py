"""The gradient check's retry at a smaller step grants its ten times higher floor for small
derivatives only across a kink. Its central difference moving was taken for a kink's, but at a
smooth point where ``f`` bends sharply the step's truncation moves it too: there, in float32, a
halved derivative of 0.01 passed against that floor, though the smaller step resolves it."""

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers.base import Layer, grad_target

#: where the wave is checked, and its frequency
X0, K = np.float32(0.02), 50.0
#: the slope that leaves a derivative of 0.01 at X0
SLOPE = K * np.cos(K * np.float64(X0)) - 0.01


class Wave(Layer):
    """``y = sin(K x) - SLOPE x``, smooth everywhere; its backward scaled by ``factor``."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def _forward(self, x):
        v = x.value.astype(np.float64)
        return (np.sin(K * v) - SLOPE * v).astype(x.value.dtype)

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None:
            v = self.inputs[0].value.astype(np.float64)
            dx += (self.factor * dz * (K * np.cos(K * v) - SLOPE)).astype(dx.dtype)


def _at() -> list[Arg]:
    return [Arg(np.array([X0], np.float32), needs_grad=True)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_halved_gradient_where_the_curve_bends_fails_in_float32(seed):
    with pytest.raises(AssertionError, match=r"Wave: gradient of input 0.* is off"):
        check_layer_grad(Wave(0.5), _at(), elements=1, seed=seed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_right_gradient_there_passes(seed):
    assert check_layer_grad(Wave(1.0), _at(), elements=1, seed=seed).worst <= 2e-2
