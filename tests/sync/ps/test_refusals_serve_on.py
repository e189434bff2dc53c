"""A real shard that refused each request the reworded refusals cover still serves another
client, and a worker holds a shard's hello reply to the same field types.

Each refusal was checked on the socket that sent it alone: a shard left unable to serve a
worker after a mistyped ``build`` or ``incarnation``, an array entry breaking one rule, an empty
header frame (alone, or before a header as a REQ socket's delimiter) or a version that is no
integer would have passed. Here a real worker, on a connection of its own, sets up and trains a
step after them all, and the shard holds its values. A shard whose hello reply carries a
``build`` that is no string (no release sent one) is refused as any mistyped reply field,
naming the shard. ``distconv pserver`` processes on 127.0.0.1 (port 0).
"""

from __future__ import annotations

import time

import msgpack
import numpy as np
import pytest
import zmq
from ps_helpers import (
    batches,
    insecure_worker,
    raw_dealer,
    shard_values,
    small_net,
    train_steps,
)
from test_refusals_name_their_cause import HELLO, PULL_ROWS

from distconv.sync.ps.wire import pack, unpack_header

pytestmark = pytest.mark.timeout(60)

#: a stats request of rank 0, well formed
STATS = {"op": "stats", "id": 7, "job": "local", "rank": 0}
ROW_ID = np.ones(1, np.int64).tobytes()
#: each malformed request's frames, and the start of the shard's refusal
MALFORMED = [
    (pack({**HELLO, "rank": 0, "build": 5}), "header field 'build' has type int"),
    (pack({**HELLO, "rank": 0, "incarnation": "x 1"}), "header field 'incarnation' has type str"),
    (
        [msgpack.packb({**PULL_ROWS, "arrays": [["int32", [2], 8]]}), ROW_ID],
        "array 0: dtype 'int32' is not one of ",
    ),
    ([b""], "empty message: its header frame has 0 bytes"),
    (
        [b"", *pack(STATS)],
        "empty message: its header frame has 0 bytes, before 1 more (a REQ socket's empty "
        "delimiter: a shard answers DEALER sockets, [header, array_0, ...], and a REQ socket "
        "drops its reply)",
    ),
    ([msgpack.packb({**STATS, "v": "7", "arrays": []})], "protocol version '7', expected 7"),
]


def test_a_shard_serves_a_worker_after_every_reworded_refusal(shards):
    (endpoint,) = shards.start(1, workers=1)
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    try:
        said = []
        for frames, _ in MALFORMED:
            raw.send_multipart(frames)
            assert raw.poll(10_000), f"no reply to {frames[:1]} within 10 s"
            said.append(unpack_header(raw.recv_multipart()[0], request=False).get("error", ""))
    finally:
        raw.close(0)
        ctx.term()
    for words, (_, start) in zip(said, MALFORMED):
        assert words.startswith(start), (words, start)
    net, data = small_net(), batches(2, 8)
    sync = insecure_worker([endpoint])
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, data)
    finally:
        sync.close()
    held = shard_values([endpoint])
    for p in net.parameters():
        np.testing.assert_array_equal(held[p.name], p.value, p.name)


def test_a_req_socket_s_request_is_told_in_the_shard_s_log(shards):
    """A client on a REQ socket never hears its refusal (its socket drops a reply without the
    empty delimiter it sent first), so the shard's log names the socket to use instead; it
    said "empty message" alone, of a message that held a well-formed header."""
    (endpoint,) = shards.start(1, workers=1)
    ctx = zmq.Context()
    req = ctx.socket(zmq.REQ)
    req.linger = 0
    req.connect(f"tcp://{endpoint}")
    told = "bad request from 127.0.0.1: empty message: its header frame has 0 bytes, before 1 more"
    try:
        req.send_multipart(pack(STATS))
        deadline = time.monotonic() + 10
        while told not in shards.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        # the shard logs before it replies: a moment more, or a reply taken is not seen
        assert not req.poll(500), "a REQ socket took the shard's reply"
    finally:
        req.close(0)
        ctx.term()
    assert f"{told} (a REQ socket's empty delimiter: a shard answers DEALER" in shards.log_text()
