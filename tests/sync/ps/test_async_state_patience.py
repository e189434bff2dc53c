"""The chief's ``get_state`` of a large optimizer state, from a live shard (review k301).

A checkpoint gathers the shards' optimizer state (Adam: twice the model) in replies of up to the
shard's cap, and ZeroMQ hands a reply over only once all of it arrived: the shard is silent
meanwhile. Pulls were allowed their bytes over :data:`~distconv.sync.ps.channel.SLOW_LINK_BYTES`
on top of the timeout; ``get_state`` was not, so a large state on a slow link failed the
checkpoint naming a live shard. Here the link is loopback and the timeout is cut to a fraction
of what ~50 MB of state take. Real shard processes.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, small_net, train_steps

HIDDEN = 200_000  # fc1 of 200000 x 12 float64, fc2 4 x 200000: about 27 MB, Adam's state twice
BLOCK_BYTES = 8 << 20


@pytest.mark.timeout(120)
def test_a_large_state_is_gathered_from_a_live_shard(shards, monkeypatch):
    (endpoint,) = shards.start(1, workers=1, mode="async")
    net = small_net(hidden=HIDDEN)
    sync = insecure_worker([endpoint], optimizer="adam", lr=1e-3, block_bytes=BLOCK_BYTES)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 8))
        monkeypatch.setattr(sync, "timeout", 0.02)  # 30 ms of silence allowed, not 50 MB's
        state = sync.state_dict()
    finally:
        sync.close()
    fc1 = state["fc1.weight"]
    assert float(fc1["step"]) == 1.0, fc1["step"]
    assert fc1["m"].shape == (HIDDEN, 12) and np.count_nonzero(fc1["m"]) > 0
