"""A second setup cut short after rank 0 read the shards' state (review k259): the state
kept through a second setup (review k258) was lost for good when that setup stopped after
its seed and send-back (a Ctrl-C or a lost rank at the barrier), or while it read the state:
the setup had forgotten which parameters the shards' state was of, so the next setup seeded
them afresh. Momentum, lr 1, gradient 1: -1, then -(0.9 + 1) = -2.9; the lost state gave -2.0."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter


def _step(sync, w) -> None:
    sync.start_step(1)
    w.grad[...] = 1.0
    sync.on_gradient(w)
    sync.finish_step()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("cut", ["barrier", "state_dict"])
def test_a_setup_cut_short_after_reading_the_state_keeps_it_for_the_next(shards, monkeypatch, cut):
    (endpoint,) = shards.start(1, workers=1)
    w = Parameter("w", np.zeros(1))
    sync = insecure_worker([endpoint], optimizer="momentum", lr=1.0)
    try:
        sync.setup([w])
        _step(sync, w)
        real = getattr(sync, cut)

        def ctrl_c(*args):
            if cut == "barrier":
                real(*args)  # rank 0 seeded and sent the state back, then waits here
            raise KeyboardInterrupt

        monkeypatch.setattr(sync, cut, ctrl_c)
        with pytest.raises(KeyboardInterrupt):
            sync.setup([w])
        monkeypatch.setattr(sync, cut, real)
        sync.setup([w])
        _step(sync, w)
        np.testing.assert_allclose(w.value, -2.9, rtol=0, atol=1e-12)
    finally:
        sync.close()
