"""In async mode a push of no example (a worker's short last step) is not applied: its
gradient is zeros of no data, on which Momentum and Adam would still move the weights and
Adam count a step; the values and state stay as the last real step left them."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.ps.client import PServerSync


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_an_async_push_of_no_example_changes_nothing(shards, name):
    w = Parameter("w", np.zeros(3))
    sync = PServerSync(
        create_optimizer(name, lr=0.1),
        rank=0,
        world_size=1,
        pservers=shards.start(1, workers=1, mode="async"),
        insecure=True,
        timeout=20,
    )
    try:
        sync.setup([w])
        sync.start_step(4)
        w.grad[...] = 4.0
        w.inc_update(sync.on_gradient)
        sync.finish_step()
        moved, state = w.value.copy(), sync.state_dict()["w"]
        assert np.all(moved < 0)
        sync.start_step(0)  # what fire_every_gradient hands over when a rank gets no example
        w.inc_update(sync.on_gradient)
        sync.finish_step()
        np.testing.assert_array_equal(w.value, moved)  # was: moved on by the momentum
        for key, value in sync.state_dict()["w"].items():
            np.testing.assert_array_equal(value, state[key], err_msg=key)
        assert sync.drops == 0  # not applied, and not a stale drop either
    finally:
        sync.close()
