"""A stopping async rank's pull of a large model, from a live shard (review k301).

At a stop (and an epoch's end) every rank of an async job pulls the whole model at once, and a
shard's reply is handed over only once all its bytes arrived: the shard is silent meanwhile.
The stop's patience was fixed (:data:`~distconv.sync.ps.channel.STOP_PATIENCE`, or three times
the longest silence seen before), so a model large for its link gave up a live shard as "gone
or stuck". Each pull's reply now adds its bytes, once per worker, over
:data:`~distconv.sync.ps.channel.SLOW_LINK_BYTES`, to the silence a shard is allowed. Here the
link is loopback and the patience is cut to what a ``stats`` reply takes, not a model's ~27 MB
(the ratio of a large model over a slow link). Real shard processes.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.stop_request import StopRequest
from distconv.sync.ps import channel

HIDDEN = 200_000  # fc1 of 200000 x 12 float64, fc2 4 x 200000: about 27 MB in all
BLOCK_BYTES = 8 << 20


@pytest.mark.timeout(120)
def test_a_stopping_rank_waits_for_a_live_shard_s_large_pull(shards, monkeypatch):
    monkeypatch.setattr(channel, "STOP_PATIENCE", 0.05)  # a stats reply's time, not a model's
    (endpoint,) = shards.start(1, workers=2, mode="async")
    nets = [small_net(seed=r, hidden=HIDDEN) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2, block_bytes=BLOCK_BYTES) for r in range(2)]
    request = StopRequest(announce=False)
    restore = None
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        run_ranks(lambda r: train_steps(nets[r], syncs[r], batches(1, 8), r, 2), 2)
        for s in syncs:  # as a worker whose waits were short (its replies small or staggered)
            s._usual_quiet = 0.0
        # the rank that pushed first holds values without the other's update: they differ
        assert not np.array_equal(nets[0].parameters()[4].value, nets[1].parameters()[4].value)
        restore = request.install()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not request.received and time.monotonic() < deadline:
            time.sleep(0.01)
        run_ranks(lambda r: syncs[r].refresh_parameters(), 2)
    finally:
        if restore is not None:
            restore()
        for s in syncs:
            s.close()
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):  # both pulled the shard's
        np.testing.assert_array_equal(p.value, q.value, err_msg=p.name)
