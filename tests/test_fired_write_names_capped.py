"""A layer's write into a held gradient names the parameters it blames, at most a few of them:
where the failing line writes a gradient whose owner it does not say (a call's item), every
held parameter is blamed, and a model of hundreds of parameters made a line naming each one."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.layers import FullyConnected, MSELoss
from distconv.layers.base import Layer
from distconv.layers.inputs import values_of
from distconv.network import Network, NetworkError
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync


class ManyBiases(Layer):
    """``y = x + b0 + ... + b5``, whose backward writes into ``b0`` after firing it, reached
    through a call: which gradient it wrote is not read without running code."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.biases = [self.make_bias(f"b{i}", (channels,), np.float64) for i in range(6)]

    def _forward(self, x: Arg) -> np.ndarray:
        return values_of(self, x) + sum(b.value for b in self.biases)

    def all_biases(self) -> list:
        return self.biases

    def _backward(self, dz, callback):
        (x,) = self.inputs
        if x.needs_grad:
            x.grad = dz if x.grad is None else x.grad + dz
        for bias in self.biases:
            bias.grad += dz.sum(axis=0)
            bias.inc_update(callback)
        self.all_biases()[0].grad += 1


def test_a_blame_of_every_held_parameter_names_three_and_counts_the_rest():
    net = Network()
    net.add("many", ManyBiases(3), "x")
    net.add("fc", FullyConnected(3, 1, dtype=np.float64), "many")
    net.add("loss", MSELoss(), ["fc", "target"])
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    sync.setup(net.parameters())
    x = np.random.default_rng(0).standard_normal((4, 3))
    sync.start_step(len(x))
    with pytest.raises(NetworkError) as caught:
        net.forward({"x": Arg(x, needs_grad=False), "target": Arg(x[:, :1], needs_grad=False)})
        net.backward(sync, loss="loss", loss_scale=len(x))
    sync.abandon_step()
    said = str(caught.value)
    assert "layer 'many' wrote into the gradient of " in said, said
    which = said.split("wrote into the gradient of ", 1)[1].split(" after firing it", 1)[0]
    assert which.count("' or '") == 2 and which.endswith("(and 3 more)"), which
