"""A gradient check that meets a kink at the point in one array and a wrong gradient in an
array checked after it names the wrong gradient: the kink says only that one array cannot be
judged there, the wrong gradient is a bug wherever it is checked. The check stopped at the
kink's refusal and the bug went unnamed until the kink was moved off."""

import numpy as np
import pytest

from distconv import Arg
from distconv.finite_differences import KinkHere
from distconv.gradient_check import check_layer_grad
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target


class RampPlusHalf(Layer):
    """``y = max(x0, 0) + x1``: input 0's gradient right (0 at 0), input 1's halved."""

    num_inputs = 2

    def _forward(self, x0, x1):
        return np.maximum(x0.value, 0.0) + x1.value

    def _backward(self, dz, callback):
        x0 = self.inputs[0].value
        if (dx0 := grad_target(self.inputs[0])) is not None:
            dx0 += dz * (x0 > 0)
        if (dx1 := grad_target(self.inputs[1])) is not None:
            dx1 += 0.5 * dz


def _inputs(first: np.ndarray) -> list[Arg]:
    second = np.random.default_rng(0).uniform(0.5, 1.0, first.shape)
    return [Arg(first, needs_grad=True), Arg(second, needs_grad=True)]


def test_a_wrong_gradient_checked_after_a_kink_is_named_first():
    with pytest.raises(AssertionError, match=r"RampPlusHalf: gradient of input 1.* is off"):
        check_layer_grad(RampPlusHalf(), _inputs(np.zeros((2, 3))))


def test_a_kink_alone_is_still_refused_as_one():
    """The same layer with input 1 right: the kink is what is left to say."""

    class RampPlus(RampPlusHalf):
        def _backward(self, dz, callback):
            super()._backward(dz, callback)
            if (dx1 := grad_target(self.inputs[1])) is not None:
                dx1 += 0.5 * dz

    with pytest.raises(KinkHere, match="input 0"):
        check_layer_grad(RampPlus(), _inputs(np.zeros((2, 3))))
