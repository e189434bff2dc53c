"""The gradient check's retry at a smaller step is for kinks: at a smooth point where ``f``
curves, its one-sided slopes differ too, but its central difference stands where it was, and
a wrong gradient that failed at the first step must not pass at the smaller one, whose floor
for small derivatives is ten times higher."""

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers.base import Layer, grad_target

#: where the bowl's input sits, above its bottom at 0.3: within float32's step of 1e-3
OFFSETS = [1e-4, 3e-4]


class Bowl(Layer):
    """``y = 50 (x - 0.3)^2``, smooth everywhere; its backward scaled by ``factor``."""

    def __init__(self, factor: float) -> None:
        super().__init__()
        self.factor = factor

    def _forward(self, x):
        return (50 * (x.value - np.float32(0.3)) ** 2).astype(x.value.dtype)

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None:
            x = self.inputs[0].value
            dx += (self.factor * dz * 100 * (x - np.float32(0.3))).astype(dx.dtype)


def _at(offset: float) -> list[Arg]:
    return [Arg(np.array([0.3 + offset], np.float32), needs_grad=True)]


@pytest.mark.parametrize("offset", OFFSETS)
def test_a_halved_gradient_at_a_curve_fails_in_float32(offset):
    with pytest.raises(AssertionError, match=r"Bowl: gradient of input 0.* is off"):
        check_layer_grad(Bowl(0.5), _at(offset), elements=1)


@pytest.mark.parametrize("offset", OFFSETS)
def test_the_right_gradient_at_a_curve_passes_in_float32(offset):
    assert check_layer_grad(Bowl(1.0), _at(offset), elements=1).worst <= 1e-3
