"""The optimizer state a worker gathers from the shards and sends back has the shapes a local
optimizer keeps, whatever the parameter's shape: a 0-d parameter's moments are arrays, not
per-block scalars."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync
from distconv.sync.ps.client import PServerSync

GRADS = (0.5, -2.0, -3.0)  # the moments of the scalar end negative


def _sync(endpoints, name, **kwargs):
    return PServerSync(
        create_optimizer(name, lr=0.1),
        rank=0,
        world_size=1,
        pservers=endpoints,
        insecure=True,
        timeout=20,
        **kwargs,
    )


def _steps(sync, params, grads) -> None:
    for g in grads:
        sync.start_step(1)
        for p in params:
            p.grad[...] = g
            p.inc_update(sync.on_gradient)
        sync.finish_step()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_a_scalar_parameters_state_round_trips_through_the_shards(shards, name):
    ref = Parameter("s", np.array(1.0))
    local = LocalSync(create_optimizer(name, lr=0.1))
    local.setup([ref])
    _steps(local, [ref], GRADS)
    want = local.state_dict()["s"]
    assert np.min(want[local.optimizer.buffers[0]]) < 0  # else the check below proves little

    scalar, vector = Parameter("s", np.array(1.0)), Parameter("w", np.ones(3))
    sync = _sync(shards.start(1, workers=1), name)
    try:
        sync.setup([scalar, vector])
        _steps(sync, [scalar, vector], GRADS)
        state = sync.state_dict()
    finally:
        sync.close()
    assert state["s"].keys() == want.keys()
    for key in want:  # was: a negative moment saved as 0 (the largest of it and 0)
        assert np.shape(state["s"][key]) == np.shape(want[key]), key
        np.testing.assert_allclose(state["s"][key], want[key], rtol=1e-14, err_msg=key)

    # resume on fresh shards (was refused: a 0-d moment for the shard's (1, 1) block)
    sync = _sync(shards.start(1, workers=1), name)
    try:
        sync.setup([scalar, vector], None, state)
        _steps(sync, [scalar, vector], GRADS)
    finally:
        sync.close()
    _steps(local, [ref], GRADS)
    np.testing.assert_allclose(scalar.value, ref.value, rtol=1e-14)
