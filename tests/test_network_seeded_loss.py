"""``Network.backward_watched`` says which layer it seeded: the named loss, or the one layer no
other reads. ``backward`` warns of an unscaled mean loss about that layer, and found it again
(the one output searched twice a pass); a probe stopped between layers learns it too."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.layers import FullyConnected, MSELoss, SoftmaxCrossEntropy
from distconv.network import Network


def _classifier(rng) -> tuple[Network, dict]:
    """A classifier and its feeds."""
    net = Network()
    net.add("fc", FullyConnected(4, 3, dtype=np.float64), inputs="x")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
    feeds = {"x": rng.standard_normal((2, 4)), "label": Arg(ids=np.array([0, 2]))}
    return net, feeds


def test_the_one_output_is_the_layer_seeded_when_no_loss_is_named(rng):
    net, feeds = _classifier(rng)
    net.forward(feeds)
    assert net.backward_watched(lambda p: None, None) == "loss"


@pytest.mark.parametrize("stop_at", [None, "loss"])
def test_a_named_loss_beside_another_is_the_layer_seeded_even_in_a_stopped_pass(rng, stop_at):
    net, feeds = _classifier(rng)
    net.add("head", FullyConnected(4, 3, dtype=np.float64), inputs="x")
    net.add("mse", MSELoss(), inputs=["head", "target"])
    net.forward({**feeds, "target": rng.standard_normal((2, 3))})
    seeded = net.backward_watched(lambda p: None, lambda name: name == stop_at, loss="mse")
    assert seeded == "mse"
    assert net["head"].weight.grad.any() and not net["fc"].weight.grad.any()
