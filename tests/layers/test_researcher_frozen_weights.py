"""A layer of one's own with static (frozen) weights, in a network and in the gradient
checker: what its mistakes are told."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.gradient_check import check_layer_grad
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.layers.base import Layer, LayerTypeError, values_of
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
