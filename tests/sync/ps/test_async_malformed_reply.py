"""A malformed reply names the shard it came from.

A reply the worker cannot read (its header not msgpack, a frame over the cap) raised
``malformed reply from a pserver: ...``: with several shards, the operator could not tell which
one speaks another protocol (an old image left running, another service on its port). It now
names the shard and its address at the end. Two ZeroMQ ROUTER sockets on 127.0.0.1 port 0
stand in for the shards: the first stays silent, the second answers the worker's request with
a frame that is not msgpack.
"""

from __future__ import annotations

import threading

import pytest
import zmq
from ps_helpers import insecure_worker, small_net

from distconv.sync.base import SyncError
from distconv.sync.ps.wire import pack, unpack_header


def answer_garbage(router: zmq.Socket) -> None:
    """Answer the first request ``router`` gets (within 20 s) with a frame that is not msgpack."""
    if router.poll(20_000):
        ident, *_ = router.recv_multipart()
        router.send_multipart([ident, b"\xc1 not msgpack"])


@pytest.mark.timeout(60)
def test_a_malformed_reply_names_its_shard():
    ctx = zmq.Context()
    routers = [ctx.socket(zmq.ROUTER) for _ in range(2)]
    endpoints = [f"127.0.0.1:{r.bind_to_random_port('tcp://127.0.0.1')}" for r in routers]
    answering = threading.Thread(target=answer_garbage, args=(routers[1],), daemon=True)
    answering.start()
    sync = insecure_worker(endpoints, 0, 1, timeout=10)
    try:
        with pytest.raises(SyncError) as raised:
            sync._ask_all([(s, {"op": "stats"}, ()) for s in range(2)], "stats")
    finally:
        answering.join(30)
        sync.close()
        for r in routers:
            r.close(0)
        ctx.term()
    said = str(raised.value)
    assert said.startswith("rank 0: malformed reply from a pserver: header is not msgpack"), said
    assert said.endswith(f" (pserver shard 1 ({endpoints[1]}))"), said


def answer_without_stats(router: zmq.Socket) -> None:
    """Answer the first request ``router`` gets (within 20 s) with a well-formed ``ok`` that
    carries no ``stats``."""
    if router.poll(20_000):
        ident, frame = router.recv_multipart()
        rid = unpack_header(frame)["id"]
        router.send_multipart([ident, *pack({"op": "ok", "id": rid})])


@pytest.mark.timeout(60)
def test_a_stats_reply_without_its_counts_is_refused_naming_its_shard():
    """A refresh reads each shard's ``updates`` from its ``stats`` reply: one without them
    raised a bare KeyError out of ``refresh_parameters``."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    endpoint = f"127.0.0.1:{router.bind_to_random_port('tcp://127.0.0.1')}"
    answering = threading.Thread(target=answer_without_stats, args=(router,), daemon=True)
    answering.start()
    sync = insecure_worker([endpoint], 0, 2, timeout=10)
    sync.mode = "async"  # as a hello reply would set it
    try:
        with pytest.raises(SyncError) as raised:
            sync.refresh_parameters()
    finally:
        answering.join(30)
        sync.close()
        router.close(0)
        ctx.term()
    said = str(raised.value)
    want = "rank 0: malformed reply from a pserver: stats reply without its 'updates' count"
    assert said == f"{want} (pserver shard 0 ({endpoint}))", said


@pytest.mark.timeout(60)
def test_a_reply_whose_values_do_not_fit_names_its_shard(shards):
    """A reply that reads as msgpack but whose versions or values do not fit the blocks asked
    for (the worker's later checks, :meth:`ReplyWriter._write`) named no shard either."""
    endpoints = shards.start(2, workers=1, mode="async")
    net = small_net()
    sync = insecure_worker(endpoints, 0, 1, timeout=10)
    try:
        sync.setup(net.parameters())
        blocks = sync.layout.blocks_on(1)
        with pytest.raises(SyncError) as raised:  # a pull's reply of shard 1 without its values
            sync._write(blocks, [], {"op": "ok", "versions": [0] * len(blocks)})
    finally:
        sync.close()
    said = str(raised.value)
    assert said.startswith("rank 0: malformed reply from a pserver: "), said
    assert said.endswith(f" (pserver shard 1 ({endpoints[1]}))"), said
