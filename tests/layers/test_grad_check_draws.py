"""The gradient checks run a layer that draws through distconv's seam as it trains, and pin its
draws: every forward of one check draws the same numbers, so finite differences judge it."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad, check_network_grad
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
