"""Another optimizer object given to a PServerSync between two fits (``sync.optimizer = ...``,
of the same settings: the shards refuse any other at the hello) starts the state afresh, as
LocalSync does and a new torch optimizer would: the second setup read the old
optimizer's state back from the shards and kept it."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync


def _two_fits(sync) -> np.ndarray:
    w = Parameter("w", np.zeros(3))
    for fit in range(2):
        if fit:
            sync.optimizer = create_optimizer("momentum", lr=1.0)  # a new one, same settings
        sync.setup([w])
        sync.start_step(1)
        w.grad[...] = np.array([1.0, -2.0, 0.5])
        sync.on_gradient(w)
        sync.finish_step()
    return w.value.copy()


@pytest.mark.timeout(90)
def test_a_new_optimizer_on_the_same_shards_starts_afresh_as_local_sync(shards):
    endpoints = shards.start(2, workers=1)
    local = _two_fits(LocalSync(create_optimizer("momentum", lr=1.0)))
    np.testing.assert_allclose(local, [-2.0, 4.0, -1.0], rtol=0, atol=1e-12)  # no velocity kept
    sync = insecure_worker(endpoints, optimizer="momentum", lr=1.0, block_bytes=16)
    try:
        np.testing.assert_allclose(_two_fits(sync), local, rtol=0, atol=1e-12)
    finally:
        sync.close()
