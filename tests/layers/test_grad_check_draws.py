"""The gradient checks run a layer that draws through distconv's seam as it trains, and pin its
draws: every forward of one check draws the same numbers, so finite differences judge it."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad, check_network_grad
from distconv.layers.base import Layer, grad_target, values_of
from distconv.layers.randomness import step_generator
from tests.layers.drawing_layers import Jitter
from tests.layers.test_grad_check_own_layers import feeds, network


def _trained(layer: Jitter) -> list:
    """What the layer drew at each forward of a check: the same numbers each time."""
    drawn = [n for n in layer.drawn if n is not None]
    assert drawn and len(drawn) == len(layer.drawn)  # every forward trained
    for n in drawn[1:]:
        np.testing.assert_array_equal(n, drawn[0])
    return drawn


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_layer_drawing_from_the_step_is_checked_training_and_a_wrong_one_fails(rng, dtype):
    """Before, the checks ran outside any step: the layer was the identity there, and a
    backward that forgot its noise passed both checks."""
    x = Arg(rng.standard_normal((4, 6)).astype(dtype), needs_grad=True)
    right = Jitter()
    assert check_layer_grad(right, [x]).worst < (1e-6 if dtype == np.float64 else 2e-2)
    _trained(right)
    with pytest.raises(AssertionError, match=r"gradient of input 0(\[.*\])? is off"):
        check_layer_grad(Jitter(wrong=True), [x])


def test_a_network_drawing_from_the_step_is_checked_training_and_a_wrong_one_fails(rng):
    right = Jitter()
    assert check_network_grad(network(right), feeds(rng), inputs=True).worst < 1e-6
    _trained(right)
    with pytest.raises(AssertionError, match=r"is off"):
        check_network_grad(network(Jitter(wrong=True)), feeds(rng), inputs=True)


def test_the_check_seed_chooses_the_draws():
    x = Arg(np.linspace(-1.0, 1.0, 24).reshape(4, 6), needs_grad=True)
    layers = [Jitter(), Jitter(), Jitter()]
    for layer, seed in zip(layers, (0, 0, 1)):
        check_layer_grad(layer, [x], seed=seed)
    same, again, other = (_trained(layer)[0] for layer in layers)
    np.testing.assert_array_equal(again, same)
    assert not np.isclose(other, same).any()


class Drawn(Layer):
    """``y = relu(x * (1 + n / 10))``, a right backward; ``n`` standard normal from the step's
    generator, drawn in the input's dtype where ``in_input_dtype``, else in float64 and cast."""

    def __init__(self, in_input_dtype: bool) -> None:
        super().__init__(act="relu")
        self.in_input_dtype = in_input_dtype

    def _forward(self, x: Arg):
        v = values_of(self, x)
        if self.in_input_dtype:
            self.noise = step_generator().standard_normal(v.shape, dtype=v.dtype)
        else:
            self.noise = step_generator().standard_normal(v.shape).astype(v.dtype)
        return v * (1 + self.noise / 10)

    def _backward(self, dz, callback):
        if (dx := grad_target(self.inputs[0])) is not None:
            dx += dz * (1 + self.noise / 10)


def test_at_a_kink_in_float32_draws_in_the_input_s_dtype_are_others_in_float64():
    """What architecture.md says a layer of one's own must mind: a float32 comparison across a
    ReLU's kink is made again in float64, which draws other numbers where the layer draws in
    its input's dtype, and a right layer is called off; drawn in float64 and cast, it passes."""
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    x[0] = 2e-4  # within float32's step of 1e-3 of the kink
    assert check_layer_grad(Drawn(in_input_dtype=False), [Arg(x, needs_grad=True)]).worst < 2e-2
    with pytest.raises(AssertionError, match=r"gradient of input 0(\[.*\])? is off"):
        check_layer_grad(Drawn(in_input_dtype=True), [Arg(x, needs_grad=True)])
    wide = Arg(x.astype(np.float64), needs_grad=True)  # in float64 alone it is judged right
    assert check_layer_grad(Drawn(in_input_dtype=True), [wide]).worst < 1e-6
