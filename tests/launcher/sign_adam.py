"""A user program for ``distconv-launch local --servers M``: a subclass of Adam with a rule of its
own (the sign of the gradient), which inherits Adam's name, so the shards, which rebuild the
optimizer by name from their own install, would train stock Adam. Every rank refuses it at setup,
before its hello (``distconv.sync.ps.shard_optimizer``), one line under ``run_main``.

``python sign_adam.py``: every rank and shard address comes from the runtime (the launcher's
variables).
"""

from __future__ import annotations

import numpy as np

import distconv.distributed as dist
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network
from distconv.optim import Adam


class SignAdam(Adam):
    """Adam's name and config, a step of the gradient's sign: a rule the shards do not know."""

    def _apply(self, value, grad, state, scale):
        value -= self.lr * np.sign(grad)


def main() -> None:
    net = Network()
    net.add("out", FullyConnected(4, 1), "x")
    net.add("loss", MSELoss(), ["out", "target"])
    sync = dist.init(SignAdam(lr=0.01))
    try:
        sync.setup(net.parameters())
    finally:
        sync.close()


if __name__ == "__main__":
    dist.run_main(main)
