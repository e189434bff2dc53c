"""A layer or a part of one's own written for the forward pass, its backward left for later:
named, with what it lacks."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers import MSELoss
from distconv.layers.base import Layer
from distconv.layers.inputs import values_of
from distconv.layers.mixed import Mixed
from distconv.layers.operator import Operator
from distconv.layers.part import Projection


class ForwardOnly(Layer):
    """Written for a forward pass, its backward left for later."""

    def _forward(self, x):
        return 2 * values_of(self, x)


def test_a_layer_without_a_backward_names_itself_and_what_it_lacks(rng):
    """A bare NotImplementedError with no message, from the base class's placeholder."""
    net = Network()
    net.add("double", ForwardOnly(), inputs="x")
    net.add("loss", MSELoss(), inputs=["double", "target"])
    net.forward({"x": rng.standard_normal((4, 3)), "target": rng.standard_normal((4, 3))})
    with pytest.raises(NotImplementedError, match=r"^ForwardOnly 'double' has no _backward\("):
        net.backward(lambda p: None)


class Doubled(Projection):
    """``out += 2 x``, written for the forward pass, its backward left for later."""

    def __init__(self, width: int) -> None:
        super().__init__(width, width)

    def forward(self, input, out):
        out += 2 * input.value


class Summed(Operator):
    """``out += a + b``, likewise."""

    def forward(self, inputs, out):
        out += inputs[0].value + inputs[1].value


def test_a_part_without_its_own_backward_names_itself_and_its_layer(rng):
    """A projection or an operator of one's own, its backward left for later, stopped training
    with the bare NotImplementedError of the part's placeholder, as a layer's did."""
    x = rng.standard_normal((4, 3))
    for parts, inputs, lacks in [
        ({"projections": [Doubled(3)]}, [Arg(x)], r"Doubled 'proj0': has no _backward\("),
        (
            {"projections": [None, None], "operators": [Summed([0, 1], 3)]},
            [Arg(x), Arg(x)],
            r"Summed 'op0': has no backward\(",
        ),
    ]:
        layer = Mixed(**parts, name="mix")
        layer.forward(*inputs)
        layer.output.grad = np.ones_like(x)
        with pytest.raises(NotImplementedError, match=rf"^Mixed 'mix': {lacks}"):
            layer.backward(lambda p: None)
