"""A gather's value that nests lists too deep is refused on arrival, naming why: the reply
holds every rank's value two levels deeper, and a value whose request msgpack could still
read (1023 levels) made a reply no worker could read: every rank of the gather, not only
its sender, got a reply it refused as malformed."""

from __future__ import annotations

import msgpack
import pytest
import zmq

from distconv.sync.ps.wire import pack, unpack_header


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.timeout(60)
def test_a_value_nested_too_deep_is_refused_and_the_others_go_on(hand):
    h = hand(workers=2)
    second = h.ctx.socket(zmq.DEALER)  # rank 1's (closed before the fixture ends the context)
    second.linger = 0
    second.connect(h.shard._sock.last_endpoint.decode())
    try:
        _gather(h, second)
    finally:
        second.close()


def _gather(h, second) -> None:
    h.send({"op": "gather", "tag": "all_equal:1", "value": "digest"})  # rank 0, held

    def rank1(frames: list) -> dict:  # (the frames, not the value: a traceback quotes args)
        second.send_multipart(frames)
        h.shard.handle(h.shard._sock.recv_multipart(copy=False))
        assert second.poll(5000)
        return unpack_header(second.recv_multipart()[0], request=False)

    head = {"op": "gather", "tag": "all_equal:1", "job": "local", "rank": 1}
    deep = pack({**head, "id": 7, "value": _deep(1023)})
    assert msgpack.unpackb(deep[0])  # a request can carry it
    reply = rank1(deep)  # was: "ok", in a header of 1024 levels no worker could read
    assert reply["op"] == "error" and reply["id"] == 7, reply
    assert "nests lists or maps more than 64 levels deep" in reply["error"]
    assert not h.client.poll(200)  # rank 0 still waits, for rank 1's next gather
    assert rank1(pack({**head, "id": 8, "value": _deep(64)}))["values"] == ["digest", _deep(64)]
    reply, _ = h.read()
    assert reply["op"] == "ok" and reply["values"] == ["digest", _deep(64)], reply
