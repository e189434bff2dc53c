"""A request of an op that carries no arrays is refused when it comes with some.

Every op's array frames were unpacked and held, whatever the op: a ``stats`` with 640 MB of
arrays was answered ``ok``, and any peer the shard admits could make it hold that much per
message. Only ``seed``, ``push``, ``set_state`` and a pull of rows carry arrays; the others
are refused with a line naming the op, and the shard goes on serving a real worker. A real
shard process, a raw socket writing the wire by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import zmq
from ps_helpers import (
    assert_equals_local_training,
    batches,
    insecure_worker,
    raw_dealer,
    small_net,
    train_steps,
)

from distconv.sync.ps.wire import pack, unpack_header

#: each op that carries no arrays, with the fields it needs besides the common ones
PLAIN_OPS = {
    "stats": {},
    "beat": {},
    "bye": {},
    "abandon": {"step": 0},
    "checkpoint": {"step": 0},
    "gather": {"tag": "barrier:0", "value": None},
    "get_state": {"blocks": [0]},
    "pull": {"blocks": [0]},  # of whole blocks: a pull of rows carries their ids
    "hello": {"host": "h", "digest": "d"},
}


@pytest.mark.timeout(60)
def test_arrays_on_an_op_that_carries_none_are_refused_and_the_shard_goes_on(shards):
    (endpoint,) = shards.start(1, workers=1)
    net, data = small_net(), batches(3, 8)
    sync = insecure_worker([endpoint])
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    arrays = [np.zeros(1 << 18, np.float32)] * 3  # 3 MiB, under every cap
    said = {}
    try:
        sync.setup(net.parameters())
        for i, (op, fields) in enumerate(PLAIN_OPS.items()):
            head = {"op": op, "id": i, "job": "local", "rank": 0, "run": sync._run, **fields}
            raw.send_multipart(pack(head, arrays))
            assert raw.poll(10_000), f"the shard did not answer the {op} within 10 s"
            said[op] = unpack_header(raw.recv_multipart()[0], request=False)
        train_steps(net, sync, data)
    finally:
        sync.close()
        raw.close(0)
        ctx.term()
    for op, reply in said.items():
        assert reply["op"] == "error", (op, reply)
        what = "a pull of whole blocks" if op == "pull" else f"a {op} request"
        assert reply["error"] == (
            f"{what} carries no arrays; this one lists 3 and came with 3 array frame(s)"
        ), reply
    assert_equals_local_training(net, data)
