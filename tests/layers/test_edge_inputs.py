"""Edge inputs a researcher may hand a layer directly: integer values, an empty batch, ids of the
wrong shape, inputs of different batch sizes (review k113)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers import (
    Activation,
    AvgPool2D,
    Conv2D,
    FullyConnected,
    MaxPool3D,
    SoftmaxCrossEntropy,
)
from distconv.layers.base import LayerError
from distconv.network import NetworkError


@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda: AvgPool2D(2, name="c"), (1, 1, 4, 4)),
        (lambda: MaxPool3D(2, name="c"), (1, 1, 2, 2, 2)),
        (lambda: Activation("sigmoid", name="c"), (2, 3)),
        (lambda: Conv2D(1, 2, 3, name="c"), (1, 1, 4, 4)),
    ],
)
def test_integer_values_are_refused_naming_the_layer(make, shape):
    """An AvgPool2D fed integer values returned zeros (1/4 cast to int64 is 0), a sigmoid
    truncated its output to 0, a convolution failed with numpy's UFuncTypeError."""
    x = np.arange(np.prod(shape)).reshape(shape) + 1
    with pytest.raises(LayerError, match=r"'c': expected float values, got int64 values"):
        make()(Arg(x))


def test_integer_images_into_an_average_pooling_network_name_the_feed():
    """In a Network an int image read first by an AvgPool2D trained on zeros, with no error."""
    net = Network()
    net.add("pool", AvgPool2D(2), "image")
    net.add("fc", FullyConnected(4, 2), "pool")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    feeds = {"image": np.ones((2, 1, 4, 4), np.int64), "label": Arg(ids=np.array([0, 1]))}
    with pytest.raises(NetworkError, match=r"AvgPool2D 'pool': input 'image' holds int64"):
        net.forward(feeds)
