"""An activation of one's own: numpy's error in its forward or backward names the layer, and
is chained, with the line of the activation that raised it."""

import traceback

import numpy as np
import pytest

from distconv import Network
from distconv.kernels.activation import ActivationFunction
from distconv.layers import FullyConnected, MSELoss
from tests.layers.researcher_layers import F64


class RowShortSquare(ActivationFunction):
    """``z ** 2``, reading one row too few in the pass named ``broken``: numpy cannot
    broadcast it."""

    name = "row_short_square"

    def __init__(self, broken: str) -> None:
        self.broken = broken

    def forward(self, z, inplace=False):
        return z * (z[:-1] if self.broken == "forward" else z)

    def backward(self, y, dy):
        return 2 * dy * (y[:-1] if self.broken == "backward" else y)


@pytest.mark.parametrize("broken", ["forward", "backward"])
def test_an_activation_s_numpy_error_names_the_layer_and_is_chained(rng, broken):
    """2117c239 chained the activation's backward's error; its forward's still went through
    checked(), which raises "from None": numpy's error, and the activation's line that made
    it, were dropped from the LayerError."""
    net = Network()
    net.add("fc", FullyConnected(3, 4, act=RowShortSquare(broken), dtype=np.float64), inputs="x")
    net.add("loss", MSELoss(), inputs=["fc", "target"])
    with pytest.raises(ValueError, match=r"^FullyConnected 'fc': operands could not be broad") as e:
        net.forward({"x": rng.standard_normal((5, 3)), "target": rng.standard_normal((5, 4))})
        net.backward(lambda p: None)
    cause = e.value.__cause__
    assert isinstance(cause, ValueError) and "could not be broadcast" in str(cause)
    lines = [frame.line for frame in traceback.extract_tb(cause.__traceback__)]
    assert any("y[:-1]" in line or "z[:-1]" in line for line in lines), lines


class Square(ActivationFunction):
    """``z ** 2``, its backward reading one row too few: numpy cannot broadcast it."""

    name = "square"

    def forward(self, z, inplace=False):
        return z * z

    def backward(self, y, dy):
        return 2 * dy * y[:-1]


def test_a_shape_error_in_an_activation_s_backward_names_the_layer(rng):
    """Its forward's error named the layer (Layer.forward runs it through checked), its
    backward's, numpy's bare "operands could not be broadcast together", named none. numpy's
    error is chained, as a _backward's is (checked() dropped it, and the activation's line)."""
    net = Network()
    net.add("fc", FullyConnected(3, 4, act=Square(), dtype=F64), inputs="x")
    net.add("loss", MSELoss(), inputs=["fc", "target"])
    net.forward({"x": rng.standard_normal((5, 3)), "target": rng.standard_normal((5, 4))})
    with pytest.raises(ValueError, match=r"^FullyConnected 'fc': operands could not be broad") as e:
        net.backward(lambda p: None)
    assert "could not be broadcast" in str(e.value.__cause__)
