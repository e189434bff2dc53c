"""A ``_forward`` of one's own that returns no array: named where it is made, not met in the
next layer."""

import pytest

from distconv import Arg, Network
from distconv.layers import FullyConnected
from distconv.layers.base import Layer, LayerTypeError
from distconv.layers.inputs import values_of
from tests.layers.researcher_layers import F64


class ReturnsArg(Layer):
    """Returns its output wrapped, as forward does, where _forward returns the array."""

    def _forward(self, x):
        return Arg(2 * values_of(self, x))


def test_a_forward_that_returns_no_array_is_named_not_met_in_the_next_layer(rng):
    """The next layer failed on it: "FullyConnected 'fc': 'Arg' object has no attribute
    'ndim'", naming the layer that was handed it, not the one that made it."""
    net = Network()
    net.add("double", ReturnsArg(), inputs="x")
    net.add("fc", FullyConnected(3, 2, dtype=F64), inputs="double")
    with pytest.raises(LayerTypeError, match=r"^ReturnsArg 'double': _forward returned Arg, not"):
        net.forward({"x": rng.standard_normal((4, 3))})
