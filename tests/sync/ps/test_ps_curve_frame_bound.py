"""The frame bound under CURVE: ZeroMQ holds ``MAXMSGSIZE`` against each frame
as it travels, and CURVE adds 33 bytes to every frame, so a frame within 33 bytes of the
bound, which the shard reports in ``max_frame_bytes`` as allowed, was dropped with its
connection: a gradient run cut to exactly the bound (consecutive parameters that add up to
it, as power-of-two layers do) never reached the shard, and the worker's step timed out."""

from __future__ import annotations

import numpy as np
import pytest
import zmq

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard

MIB = 1 << 20


def test_a_curve_shard_leaves_room_for_curves_framing(job_keys):
    shard = Shard(ShardConfig(bind="127.0.0.1:0", keys_dir=job_keys, max_frame_bytes=4 * MIB))
    try:
        assert shard._sock.getsockopt(zmq.MAXMSGSIZE) == 4 * MIB + 33
    finally:
        shard.close()


@pytest.mark.timeout(60)
def test_a_gradient_run_of_exactly_the_frame_bound_reaches_a_curve_shard(shards, job_keys):
    (endpoint,) = shards.start(1, workers=1, keys=job_keys, extra=["--max-frame-bytes", str(MIB)])
    # four 256 KiB parameters on the one shard: their gradients leave as one 1 MiB run
    params = [Parameter(f"w{i}", np.zeros(MIB // 32)) for i in range(4)]
    sync = PServerSync(
        create_optimizer("sgd", lr=0.05),
        rank=0,
        world_size=1,
        pservers=[endpoint],
        keys_dir=job_keys,
        timeout=15,  # a loaded CI machine; without the fix it waits this long
    )
    try:
        sync.setup(params)
        sync.start_step(4)
        for p in params:
            p.grad[...] = 1.0
            sync.on_gradient(p)
        sync.finish_step()  # timed out: ZeroMQ dropped the 1 MiB + 33 byte frame
        assert sync.push_messages == 1
    finally:
        sync.close()
    for p in params:
        np.testing.assert_array_equal(p.value, np.full(MIB // 32, -0.05 / 4))
