"""A layer of one's own with static (frozen) weights, in a network and in the gradient
checker: what its mistakes are told."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.gradient_check import check_layer_grad
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.layers.base import Layer, LayerTypeError
from distconv.layers.inputs import values_of
from tests.layers.researcher_layers import F64, Scale


def test_adding_into_a_frozen_weight_names_the_layer_and_the_weight(rng):
    """A static parameter's grad is None: the backward failed with numpy's bare "unsupported
    operand type(s) for +=: 'NoneType'", naming neither the layer nor the weight."""
    net = Network()
    net.add("scale", Scale(4), inputs="x")
    net.add("fc", FullyConnected(4, 3, dtype=F64), inputs="scale")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
    net["scale"].w.set_static(True)
    net.forward({"x": rng.standard_normal((5, 4)), "label": Arg(ids=np.arange(5) % 3)})
    with pytest.raises(LayerTypeError, match=r"Scale 'scale': .*\['scale.w'\] have no gradient"):
        net.backward(lambda p: None)


def test_the_gradient_checker_s_static_pass_names_them_too(rng):
    """check_layer_grad freezes every parameter for its last pass: the same bare TypeError,
    now saying that the check froze them."""
    with pytest.raises(LayerTypeError, match=r"froze every parameter \(\['Scale.w', 'Scale.b'\]"):
        check_layer_grad(Scale(3), [Arg(rng.standard_normal((4, 3)))])


class TiedTwice(Layer):
    """``w * (w * x)``: one weight, registered under a key for each use, each use adding its
    share, the weight's callback after the second (its ``shared_count`` is 2)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.w = self.new_param("w", np.full(n, 2.0, F64))
        self.add_param("w_again", self.w)

    def _forward(self, x):
        return values_of(self, x) * self.w.value**2

    def _backward(self, dz, callback):
        x, w = self.inputs[0], self.w
        for _ in range(2):  # each use's share: d(w w x)/dw = 2 w x, one w x a use
            w.grad += (dz * x.value * w.value).sum(0)
            w.inc_update(callback)


def test_a_frozen_weight_registered_under_two_keys_is_named_once(rng):
    """It was listed once per key: ``['TiedTwice.w', 'TiedTwice.w']``."""
    layer = TiedTwice(3)
    layer.w.set_static(True)
    layer.forward(Arg(rng.standard_normal((2, 3))))
    layer.output.grad = np.ones((2, 3))
    with pytest.raises(LayerTypeError, match=r"static parameter\(s\) \['TiedTwice.w'\] have"):
        layer.backward(lambda p: None)


class Doubling(Layer):
    """``2 x``, with a backward that is wrong: it adds ``3 dz``."""

    def _forward(self, x):
        return 2 * values_of(self, x)

    def _backward(self, dz, callback):
        if self.inputs[0].needs_grad:
            self.inputs[0].grad += 3 * dz


@pytest.mark.parametrize("frozen", [False, True])
def test_a_check_with_nothing_to_check_is_refused_not_passed(rng, frozen):
    """Data fed as the README feeds it (``needs_grad=False``) to a layer with no parameter, or
    one whose parameters are all static: the report was empty, and a wrong backward passed."""
    layer = Doubling() if not frozen else Scale(3)
    for p in layer.parameters():
        p.set_static(True)
    x = Arg(rng.standard_normal((4, 3)), needs_grad=False)
    with pytest.raises(ValueError, match=r"nothing to check: no parameter trains, no input"):
        check_layer_grad(layer, [x])
    x.needs_grad = True  # as asked: the wrong backward is found
    if not frozen:
        with pytest.raises(AssertionError, match=r"gradient of input 0 is off"):
            check_layer_grad(layer, [x])
