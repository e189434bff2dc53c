"""Protocol 3: a reply's dense values travel as one frame, checked before any copy.

The shard's store (one buffer per dtype, blocks in id order) answers consecutive blocks with a
view and others with a copy; a worker refuses a reply whose values frame does not fit the
blocks it asked for, before it writes anything; a short push is refused and the shard goes on
serving; one worker through the shards takes the very steps of a single process, bit for bit.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import zmq
from ps_helpers import (
    assert_bad_push_refused_then_worker_served,
    batches,
    insecure_worker,
    small_net,
    train_steps,
)

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.ps.values import ValueStore
from distconv.sync.ps.wire import WireError, pack, packed_values, unpack_header


def _store():
    """Blocks 0..3: float32 (3, 1), float64 (2, 2), float32 (1, 1), float64 (1, 2)."""
    shapes = [((3, 1), np.float32), ((2, 2), np.float64), ((1, 1), np.float32), ((1, 2), "f8")]
    blocks = {
        bid: SimpleNamespace(value=np.arange(np.prod(s), dtype=d).reshape(s) + 10 * bid)
        for bid, (s, d) in enumerate(shapes)
    }
    expect = {bid: b.value.copy() for bid, b in blocks.items()}
    return ValueStore(blocks), blocks, expect


def _bytes(expect, ids):
    return b"".join(expect[b].tobytes() for b in ids)


def test_the_store_answers_consecutive_blocks_with_a_view_and_others_with_a_copy():
    store, blocks, expect = _store()
    for bid, b in blocks.items():  # each value is now a view of its dtype's buffer
        np.testing.assert_array_equal(b.value, expect[bid])
        assert any(np.shares_memory(b.value, buf) for buf in store.buffers.values())
    view = store.frame([0, 2])  # consecutive in the float32 buffer
    assert view.dtype == np.uint8 and view.tobytes() == _bytes(expect, [0, 2])
    assert np.shares_memory(view, blocks[0].value)
    blocks[2].value += 1  # an update shows in the next frame (the shard sends copies of it)
    expect[2] += 1
    assert store.frame([0, 2]).tobytes() == _bytes(expect, [0, 2])
    for ids in ([2, 0], [0, 1, 2, 3], [3]):
        frame = store.frame(ids)
        assert frame.tobytes() == _bytes(expect, ids)
        if ids == [3]:  # one block is a run of one: a view
            assert np.shares_memory(frame, blocks[3].value)
        else:
            assert not any(np.shares_memory(frame, buf) for buf in store.buffers.values())
    assert store.frame([]).nbytes == 0


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ([np.zeros(7, np.uint8)], "values frame of 7 bytes, the blocks asked for need 8"),
        ([np.zeros(9, np.uint8)], "values frame of 9 bytes"),
        ([np.zeros(8, np.uint8)] * 2, "one uint8 frame of 8 bytes, got uint8[8], uint8[8]"),
        ([np.zeros(2, np.float32)], "got float32[2]"),
        ([np.zeros((2, 4), np.uint8)], "got uint8[2, 4]"),
        ([], "got none"),
    ],
)
def test_a_values_frame_that_does_not_fit_the_blocks_is_refused(arrays, message):
    with pytest.raises(WireError, match=message.replace("[", r"\[")):
        packed_values(arrays, 8)


def test_a_parameter_may_not_be_raw_bytes():
    from distconv.parameter import Parameter

    sync = insecure_worker(["127.0.0.1:1"])
    try:
        with pytest.raises(WireError, match="dtype uint8 cannot travel"):
            sync._spec(Parameter("w", np.zeros(4, np.uint8)))
    finally:
        sync.close()


class _Tamper:
    """A proxy between one worker and one shard that, once ``armed``, cuts the last 8 bytes
    off every values frame of a reply (and its table entry, so that the framing still holds
    and only the size against the blocks can tell)."""

    def __init__(self, shard: str) -> None:
        self.ctx = zmq.Context()
        self.front = self.ctx.socket(zmq.ROUTER)
        self.front.linger = 0
        port = self.front.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"127.0.0.1:{port}"
        self.back = self.ctx.socket(zmq.DEALER)
        self.back.linger = 0
        self.back.connect(f"tcp://{shard}")
        self.armed = False
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.front, zmq.POLLIN)
        poller.register(self.back, zmq.POLLIN)
        peer = None
        while not self.stop.is_set():
            for sock, _ in poller.poll(50):
                if sock is self.front:
                    peer, *frames = self.front.recv_multipart()
                    self.back.send_multipart(frames)
                else:
                    self.front.send_multipart([peer, *self._edit(self.back.recv_multipart())])

    def _edit(self, frames: list[bytes]) -> list[bytes]:
        header = unpack_header(frames[0], request=False)
        table = header["arrays"]
        if not self.armed or len(table) != 1 or table[0][0] != "uint8":
            return frames
        short = frames[1][:-8]
        body = {k: v for k, v in header.items() if k not in ("v", "arrays")}
        head, _ = pack(body, [np.frombuffer(short, np.uint8)])
        return [head, short]

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.front.close(0)
        self.back.close(0)
        self.ctx.term()


@pytest.mark.timeout(60)
def test_a_short_values_frame_is_refused_before_any_parameter_is_written(shards):
    (endpoint,) = shards.start(1, workers=1)
    proxy = _Tamper(endpoint)
    sync = insecure_worker([proxy.endpoint])
    net, data = small_net(), batches(2, 8)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, data[:1])
        before = [p.value.copy() for p in net.parameters()]
        proxy.armed = True
        with pytest.raises(SyncError, match="malformed reply from a pserver: values frame of"):
            train_steps(net, sync, data[1:])
        for p, value in zip(net.parameters(), before):
            np.testing.assert_array_equal(p.value, value)  # checked before any copy
    finally:
        sync.close()
        proxy.close()


@pytest.mark.timeout(60)
def test_a_short_push_is_refused_and_the_shard_serves_a_worker_on(shards):
    def last_frame_short(head, blocks):
        frames = pack(head, [np.ones((b.stop - b.start, 1)) for b in blocks])
        return [frames[0], *map(bytes, frames[1:-1]), bytes(frames[-1])[:-8]]

    assert_bad_push_refused_then_worker_served(shards, last_frame_short, "header says")


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_one_worker_through_the_shards_takes_a_single_process_s_steps_bit_for_bit(shards, name):
    """The shard runs the rule on the rank-order sum with ``grad_scale = 1 / examples``, the
    call ``LocalSync`` makes: with one worker the weights agree to the last bit."""
    data = batches(3, 7)  # 7 examples: 1/7 is inexact, so dividing first would show
    endpoints = shards.start(2, workers=1)
    net = small_net()
    sync = insecure_worker(endpoints, optimizer=name, lr=0.05)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, data)
    finally:
        sync.close()
    ref = small_net()
    local = LocalSync(create_optimizer(name, lr=0.05))
    local.setup(ref.parameters())
    train_steps(ref, local, data)
    for p, q in zip(net.parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.value, q.value, err_msg=p.name)
