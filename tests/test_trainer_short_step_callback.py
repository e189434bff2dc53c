"""The Trainer hands gradients to a sync strategy through one method on every path: backward
is handed ``on_gradient``, and a short last step whose last pass got no example handed them to
``__call__``, so a strategy overriding either (to time, log or clip) was called on one path
only."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.optim import SGD
from distconv.sync.local import LocalSync

# overriding __call__ is warned where the class is made (the Trainer calls on_gradient); this
# class overrides it on purpose, to show the Trainer never calls it
with pytest.warns(UserWarning, match="on_gradient"):

    class Counting(LocalSync):
        """LocalSync counting the gradients its on_gradient and its __call__ are handed."""

        def __init__(self) -> None:
            super().__init__(SGD(lr=0.01))
            self.on, self.called = 0, 0

        def on_gradient(self, param) -> None:
            self.on += 1
            super().on_gradient(param)

        def __call__(self, param) -> None:
            self.called += 1
            super().__call__(param)


def test_a_short_last_step_s_empty_pass_hands_gradients_to_on_gradient_as_backward_does():
    rng = np.random.default_rng(0)
    net = Network()
    net.add("fc", FullyConnected(3, 1), "x")
    net.add("loss", MSELoss(), ["fc", "target"])
    data = {
        "x": rng.standard_normal((10, 3)).astype(np.float32),
        "target": rng.standard_normal((10, 1)).astype(np.float32),
    }
    sync = Counting()
    # 10 examples, 4 a pass, 2 passes a step: the second step's passes are of 2 and 0
    Trainer(net, sync, batch_size=4, accumulate=2, progress=False).fit(data, epochs=1)
    assert (sync.on, sync.called) == (4, 0)  # two parameters, two steps: on_gradient alone
