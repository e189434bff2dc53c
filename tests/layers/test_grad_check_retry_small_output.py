"""The gradient check's retry at a smaller step raises its floor for small derivatives across a
kink no further than the outputs' rounding at that step needs. The floor grows with ``|f|`` but
is at least that of ``|f| = 1``, so under a float32 output of 0.1 the retry passed, near a leaky
ReLU's kink, a backward that dropped the leak of 0.01 or halved it: errors a hundred times what
rounding moves its central difference by, which the first step fails away from the kink."""

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.layers.base import Layer, grad_target

#: the kink, the leak's slope, the output's offset, and where the check is made (0.2 of the
#: float32 step to the kink's left: the first step crosses it, the retry's does not)
KINK, LEAK, OFFSET, X0 = 0.3, 0.01, 0.1, np.float32(0.3 - 2e-4)


class Leaky(Layer):
    """``y = OFFSET + LEAK (x - KINK)`` left of the kink, ``OFFSET + x - KINK`` right of it; its
    backward's slope on the left is ``leak``."""

    def __init__(self, leak: float) -> None:
        super().__init__()
        self.leak = leak

    def _forward(self, x):
        v = x.value.astype(np.float64) - KINK
        return (OFFSET + np.where(v < 0, LEAK * v, v)).astype(x.value.dtype)

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None:
            v = self.inputs[0].value.astype(np.float64) - KINK
            dx += (dz * np.where(v < 0, self.leak, 1.0)).astype(dx.dtype)


def _at(x=X0) -> list[Arg]:
    return [Arg(np.array([x], np.float32), needs_grad=True)]


@pytest.mark.parametrize("leak", [0.0, LEAK / 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_wrong_leak_near_the_kink_fails_in_float32(leak, seed):
    with pytest.raises(AssertionError, match=r"Leaky: gradient of input 0.* is off"):
        check_layer_grad(Leaky(leak), _at(), elements=1, seed=seed)


@pytest.mark.parametrize("leak", [0.0, LEAK / 2])
def test_away_from_the_kink_the_first_step_fails_it_too(leak):
    with pytest.raises(AssertionError, match=r"Leaky: gradient of input 0.* is off"):
        check_layer_grad(Leaky(leak), _at(np.float32(KINK - 0.05)), elements=1, seed=0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_right_leak_there_passes(seed):
    assert check_layer_grad(Leaky(LEAK), _at(), elements=1, seed=seed).worst <= 2e-2
