"""The size cap holds per message: frames each under ``--max-message-bytes`` but together over
it are refused with an error reply before any frame becomes an array, and the shard goes on."""

from __future__ import annotations

import msgpack
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

from distconv.sync.ps.wire import WireError, pack, unpack_arrays, unpack_header

CAP = 4096


def _pull(n_frames: int, frame_bytes: int, declared: int | None = None) -> list:
    """A pull whose ``n_frames`` id arrays are ``frame_bytes`` each; the table may declare
    ``declared`` bytes per frame instead (a lying header)."""
    ids = [np.zeros(frame_bytes // 8, np.int64) for _ in range(n_frames)]
    head = {"op": "pull", "id": 9, "job": "local", "rank": 0, "blocks": [0] * n_frames}
    frames = pack({**head, "rows": [len(a) for a in ids]}, ids)
    if declared is not None:
        header = msgpack.unpackb(frames[0])
        header["arrays"] = [["int64", [declared // 8], declared] for _ in ids]
        frames[0] = msgpack.packb(header)
    return frames


def test_frames_each_under_the_cap_but_over_it_together_are_refused_for_their_size():
    frames = _pull(3, 2048)
    with pytest.raises(WireError, match=r"3 array frames holds 6144 bytes, more than the 4096"):
        unpack_arrays(unpack_header(frames[0]), frames[1:], max_bytes=CAP)
    # the size is the frames', not what the header claims: a table declaring 8 bytes a frame
    # is refused for the 6144 bytes that arrived, before any entry is compared to its frame
    lying = _pull(3, 2048, declared=8)
    with pytest.raises(WireError, match="holds 6144 bytes"):
        unpack_arrays(unpack_header(lying[0]), lying[1:], max_bytes=CAP)


def test_a_live_shard_answers_an_oversized_message_and_keeps_serving(shards):
    (endpoint,) = shards.start(1, workers=1, extra=["--max-message-bytes", str(CAP)])
    net = small_net()
    sync = insecure_worker([endpoint])
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    data = batches(2, 4)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, data[:1])
        raw.send_multipart(_pull(3, 2048))  # 3 x 2 KiB: each frame fits, the message does not
        assert raw.poll(10_000), "the shard did not answer"
        reply = unpack_header(raw.recv_multipart()[0], request=False)
        assert reply["op"] == "error" and reply["id"] == 9
        assert "holds 6144 bytes, more than the 4096 of --max-message-bytes" in reply["error"]
        train_steps(net, sync, data[1:])  # the shard still serves the real worker
        assert sync.shard_stats()[0]["errors"] == 1
    finally:
        sync.close()
        raw.close(0)
        ctx.term()
    assert_equals_local_training(net, data)
