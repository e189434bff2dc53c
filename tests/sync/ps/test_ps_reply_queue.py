"""Every reply reaches a peer that reads late, however many it has not read yet.

At ZeroMQ's default send high-water mark (1000 messages a peer) the shard's ROUTER dropped,
without a word, every reply to a peer that had not read 1000: 1,200 pulls from a client that read
only at the end got 1,000 replies, and 2,500 async pushes of 1 MiB (a worker's step of 2.5 GB of
gradients on one shard, read at ``finish_step``) 2,391; the shard counted them all as sent and
the worker waited out its timeout for the rest. A real shard; the client takes one message into
its queue (``RCVHWM`` 1, small socket buffers) so that ZeroMQ holds the others on the shard's
side until it reads.
"""

from __future__ import annotations

import numpy as np
import pytest
import zmq

from distconv.sync.ps.wire import pack, unpack_header

pytestmark = pytest.mark.timeout(120)

ROWS = 8192  # one float64 block of 64 KiB
PULLS = 1300  # past the default mark, and the few replies the socket buffers hold


def _client(ctx: zmq.Context, endpoint: str, slow: bool) -> zmq.Socket:
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    if slow:  # one reply in its queue; the rest wait on the shard's side
        sock.setsockopt(zmq.RCVHWM, 1)
        sock.setsockopt(zmq.RCVBUF, 4096)
    sock.connect(f"tcp://{endpoint}")
    return sock


def test_a_client_that_reads_its_replies_late_gets_every_one(shards):
    (endpoint,) = shards.start(1, workers=1)
    ctx = zmq.Context()
    chief, late = _client(ctx, endpoint, False), _client(ctx, endpoint, True)
    try:
        head = {"op": "seed", "id": 0, "job": "local", "rank": 0, "table": [[0, 0, 0, ROWS]]}
        head.update(params=[["w", [ROWS], "float64", False]], optimizer={"name": "sgd", "lr": 1.0})
        chief.send_multipart(pack(head, [np.zeros((ROWS, 1))]))
        assert chief.poll(10_000) and unpack_header(chief.recv(), request=False)["op"] == "ok"
        for i in range(PULLS):
            late.send_multipart(
                pack({"op": "pull", "id": i, "job": "local", "rank": 0, "blocks": [0]})
            )
        ids = []
        while len(ids) < PULLS and late.poll(5_000):
            ids.append(unpack_header(late.recv_multipart()[0], request=False)["id"])
        assert ids == list(range(PULLS)), f"{len(ids)} of {PULLS} replies came"
    finally:
        chief.close(0)
        late.close(0)
        ctx.term()
