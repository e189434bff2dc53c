"""The error reply to a header a shard refuses says which request it answers, where the
header can say.

A shard answered every header that failed its first checks (protocol version, op, a field
missing or of another type) with ``id`` -1, although the header was a map that named its
``id``. A worker cannot match such a reply to a request: while the shard also owes it the
answer to a request given up on (a push or gather held for a rank that is gone, a pull timed
out), the worker takes the -1 for that late answer and ignores it, and the request it waits for
runs to its timeout, the shard's reason only in a warning. Now the reply carries the header's
``id`` whenever it is an int; -1 is left for a header that is no map of one (not msgpack, too
large, an ``id`` of another type). Raw requests over a real socket, to a shard of two workers
that holds rank 0's gather (rank 1 never sends): the refusals come after the held request, as
a worker's would.
"""

from __future__ import annotations

import msgpack
import pytest
import zmq
from ps_helpers import raw_dealer

from distconv.sync.ps.wire import PROTOCOL_VERSION, pack, unpack_header

#: a gather of rank 0 that the shard holds until rank 1 sends its own (never)
HELD = {"op": "gather", "id": 1, "job": "local", "rank": 0, "tag": "barrier:1", "value": None}

#: requests refused at steps 3 to 5 of docs/protocol.md's validation, with what the error says
REFUSED = [
    ({**HELD, "v": PROTOCOL_VERSION - 1, "arrays": []}, "protocol version"),
    ({**HELD, "v": PROTOCOL_VERSION, "arrays": [], "op": "pul"}, "unknown op"),
    ({"v": PROTOCOL_VERSION, "op": "pull", "id": 9, "arrays": []}, "lacks 'job'"),
    ({**HELD, "v": PROTOCOL_VERSION, "arrays": [], "tag": 3}, "'tag' has type int"),
]


def _ask(raw: zmq.Socket, frames: list) -> dict:
    raw.send_multipart(frames)
    assert raw.poll(10_000), "no reply within 10 s"
    return unpack_header(raw.recv_multipart()[0], request=False)


@pytest.mark.timeout(60)
def test_a_refused_header_gets_its_own_id_back(shards):
    (endpoint,) = shards.start(1, workers=2)
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    try:
        raw.send_multipart(pack(HELD))
        assert not raw.poll(300), "the gather of rank 0 alone was answered"
        replies = []
        for number, (header, _) in enumerate(REFUSED, start=2):
            replies.append(_ask(raw, [msgpack.packb({**header, "id": number})]))
        no_id = _ask(raw, [msgpack.packb({**REFUSED[0][0], "id": "two"})])
        # msgpack's true is a Python bool, an int to isinstance: echoed, it made a reply whose
        # id no worker reads (a reply's id is an int, never a bool)
        bool_id = _ask(raw, [msgpack.packb({**REFUSED[0][0], "id": True})])
        garbage = _ask(raw, [b"\xc1 not msgpack"])
    finally:
        raw.close(0)
        ctx.term()
    for number, ((_, said), reply) in enumerate(zip(REFUSED, replies), start=2):
        assert reply["op"] == "error" and said in reply["error"], reply
        assert reply["id"] == number, f"{said}: answered with id {reply['id']}, not {number}"
    assert no_id["id"] == -1 and "protocol version" in no_id["error"], no_id
    assert bool_id["id"] == -1 and "protocol version" in bool_id["error"], bool_id
    assert garbage["id"] == -1 and "not msgpack" in garbage["error"], garbage
