"""What the tests of whose a layer's error is share: a layer with its bias frozen, run
forward with its output's gradient set, and a layer whose forward numpy refuses to cast."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers.base import Layer
from distconv.network import NetworkError


def frozen_bias_run_forward(layer: Layer) -> Layer:
    """``layer`` (a Scale's ``b``) with its bias frozen, run forward on ones of (2, 3), its
    output's gradient set: its backward is next."""
    layer.b.set_static(True)
    layer.forward(Arg(np.ones((2, 3))))
    layer.output.grad = np.ones((2, 3))
    return layer


def assert_casting_error_comes_out(layer: Layer) -> None:
    """``layer`` adding float inputs into an int64 buffer of its own in forward, in a
    Network: numpy's casting error comes out as it is, not a NetworkError nor one of the
    reading's own."""
    net = Network()
    net.add("own", layer, inputs=["x", "labels"])
    feeds = {"x": Arg(np.ones((4, 3))), "labels": Arg(np.ones((4, 3), np.int64))}
    with pytest.raises(TypeError, match=r"^Cannot cast ufunc 'add' output") as e:
        net.forward(feeds)
    assert type(e.value) is not NetworkError, e.value
