"""An integer array reaches a layer as ids (``feeds_of``): the refusal says how to cast it, for
an image and for a regression target alike. An integer target of an ``MSELoss`` (counts read
from a file) was told to "cast images to a float type ... / 255", which would scale it."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.layers.errors import LayerError
from distconv.models import lenet
from distconv.optim import SGD
from distconv.sync.local import LocalSync

rng = np.random.default_rng(0)


def test_an_integer_regression_target_is_told_to_cast_without_scaling():
    net = Network()
    net.add("fc", FullyConnected(4, 1), "x")
    net.add("loss", MSELoss(), ["fc", "target"])
    data = {"x": rng.random((16, 4)).astype(np.float32), "target": rng.integers(0, 5, (16, 1))}
    with pytest.raises(LayerError) as raised:
        Trainer(net, LocalSync(SGD(lr=0.1)), 8, progress=False).fit(data, epochs=1)
    said = str(raised.value)
    assert said.startswith("MSELoss 'loss': expected float values, got int64 ids"), said
    assert "a regression target as y.astype(np.float32)" in said, said


def test_integer_images_are_still_told_to_scale():
    data = {"image": rng.integers(0, 256, (16, 1, 8, 8), np.uint8), "label": np.zeros(16, int)}
    trainer = Trainer(lenet((1, 8, 8), 2, channels=(2,), hidden=4), LocalSync(SGD(lr=0.1)), 8)
    with pytest.raises(LayerError, match=r"images as x\.astype\(np\.float32\) / 255"):
        trainer.fit(data, epochs=1)
