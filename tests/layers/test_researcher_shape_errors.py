"""numpy's shape errors in a forward or backward of one's own: they name the layer, and
chain numpy's error."""

import pytest

from distconv import Network
from distconv.layers import MSELoss
from distconv.sync.ps.wire import WireError
from tests.layers.researcher_layers import Scale


def test_a_shape_error_in_a_forward_of_one_s_own_names_the_layer(rng):
    """Two Scale layers, one fed 6 features for its 4: numpy's "operands could not be broadcast
    together" named neither. It names the layer now, and keeps the line it came from."""
    net = Network()
    net.add("wide", Scale(6), inputs="x")
    net.add("narrow", Scale(4), inputs="wide")
    with pytest.raises(ValueError, match=r"^Scale 'narrow': operands could not be broadcast") as e:
        net.forward({"x": rng.standard_normal((5, 6))})
    assert "could not be broadcast" in str(e.value.__cause__)


class SumForgotten(Scale):
    """Its weight's gradient is added unsummed over the batch: numpy cannot broadcast it."""

    def _backward(self, dz, callback):
        self.w.grad += dz * self.inputs[0].value  # (N, n) into (n,)
        self.w.inc_update(callback)


@pytest.mark.parametrize("layer", [SumForgotten, Scale])
def test_a_shape_error_in_a_backward_of_one_s_own_names_the_layer(rng, layer):
    """numpy's "non-broadcastable output operand with shape (4,)" named no layer, where the
    same error in a forward did; a callback's own ValueError (a sync's wire) still passes as
    it is, not relabelled as the layer's."""
    net = Network()
    net.add("scale", layer(4), inputs="x")
    net.add("loss", MSELoss(), inputs=["scale", "target"])
    net.forward({"x": rng.standard_normal((5, 4)), "target": rng.standard_normal((5, 4))})

    def callback(p):
        raise WireError("the server refused the push")

    if layer is SumForgotten:
        with pytest.raises(ValueError, match=r"^SumForgotten 'scale': backward: non-broad") as e:
            net.backward(callback)
        assert "non-broadcastable" in str(e.value.__cause__)
    else:
        with pytest.raises(WireError, match=r"^the server refused the push$"):
            net.backward(callback)
