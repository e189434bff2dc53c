"""Parameters of one's own made outside a layer and named by the caller: two of one name are
refused, naming the layers that hold them."""

import numpy as np
import pytest

from distconv import Network, Parameter, Trainer
from distconv.layers import SoftmaxCrossEntropy
from distconv.layers.base import Layer
from distconv.layers.inputs import values_of
from distconv.network import NetworkError
from distconv.optim import SGD
from distconv.sync.local import LocalSync
from tests.layers.researcher_layers import Gain


def test_two_parameters_of_one_name_are_refused_naming_both_layers():
    """Each layer made its own Parameter("w"): "two different parameters are named 'w'" named
    neither layer that holds one."""
    net = Network()
    net.add("first", Gain(Parameter("w", np.ones(3))), inputs="x")
    net.add("second", Gain(Parameter("w", np.ones(3))), inputs="first")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["second", "label"])
    with pytest.raises(NetworkError, match=r"named 'w', in layers 'first' and 'second': "):
        Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=4)


class TwoGains(Layer):
    """``x * a * b``, its two weights made outside, each named "w" by the caller."""

    def __init__(self) -> None:
        super().__init__()
        self.a = self.add_param("a", Parameter("w", np.ones(3)))
        self.b = self.add_param("b", Parameter("w", np.ones(3)))

    def _forward(self, x):
        return values_of(self, x) * self.a.value * self.b.value


def test_two_parameters_of_one_name_in_one_layer_are_said_to_be_in_one():
    """Refused as "in layers 'gains' and 'gains'", with the advice to pass one Parameter to
    both layers to share it: there is one layer, and sharing would make a different model."""
    net = Network()
    net.add("gains", TwoGains(), inputs="x")
    with pytest.raises(NetworkError, match=r"named 'w', both in layer 'gains': .*rename one$"):
        net.parameters()
