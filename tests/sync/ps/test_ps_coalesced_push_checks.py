"""Coalesced pushes: the outbox holds gradients back while the previous push has
not left (a tracker that tells the truth for small frames too); a push is checked whole before
any of it is kept, in sync and in async mode; stats count accepted pushes only; an update that
fails midway in async mode fails the job. Real shards on 127.0.0.1 and raw DEALER sockets."""

from __future__ import annotations

import shutil
import tempfile
import threading
from dataclasses import dataclass

import numpy as np
import pytest
import zmq
from ps_helpers import (
    assert_equals_local_training,
    batches,
    insecure_worker,
    small_net,
    train_steps,
)

from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.outbox import PUSH_BYTES
from distconv.sync.ps.server import Shard
from distconv.sync.ps.wire import pack, send, unpack_header

STEPS, BATCH = 2, 8


def test_a_tracked_message_ending_in_a_small_frame_is_not_done_until_it_has_left():
    ctx = zmq.Context()
    # an IPC path of its own, not a TCP port: a port found free and bound later could be taken
    # in between by another test's socket, which would then be sent this message
    folder = tempfile.mkdtemp(prefix="dc", dir="/tmp")  # short: IPC paths hold ~100 bytes
    address = f"ipc://{folder}/router"
    dealer, router = ctx.socket(zmq.DEALER), ctx.socket(zmq.ROUTER)
    dealer.linger = router.linger = 0
    try:
        dealer.connect(address)  # nobody listens yet: the message waits
        # a bias-sized last frame, far under pyzmq's 64 KiB copy threshold
        tracker = send(dealer, pack({"op": "bye"}, [np.ones(4096), np.ones(3)]), track=True)
        assert not tracker.done
        router.bind(address)  # ZeroMQ reconnects and the message leaves
        assert router.poll(10_000)
        assert len(router.recv_multipart()) == 4  # identity, header, two arrays
        tracker.wait(10)
        assert tracker.done
    finally:
        dealer.close()
        router.close()
        ctx.term()
        shutil.rmtree(folder)


def test_a_copied_message_cannot_be_tracked():
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.linger = 0
    try:  # copied, the message leaves no tracker: asking for one is a caller's mistake
        with pytest.raises(ValueError, match="track=True with copy=True"):
            send(dealer, pack({"op": "bye"}, [np.ones(4096)]), track=True, copy=True)
    finally:
        dealer.close()
        ctx.term()


@dataclass
class _Tracker:
    """A stand-in for the previous push's ``zmq.MessageTracker``."""

    done: bool


@pytest.mark.parametrize("link_free", [False, True])
def test_gradients_queue_while_the_previous_push_has_not_left(shards, link_free):
    endpoints = shards.start(1, workers=1)
    data = batches(STEPS, BATCH)
    net, sync = small_net(), insecure_worker(endpoints)
    sync.push_bytes = 0  # each gradient would go at once if the link were free
    seen = []  # (messages sent, bytes queued) after each gradient

    def on_gradient(param, queue=sync.on_gradient):
        sync._last_push[0] = _Tracker(done=link_free)
        queue(param)
        seen.append((sync.push_messages, sync._queued_bytes[0]))

    sync.on_gradient = on_gradient
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, data[:1])
        first_step = sync.push_messages
        train_steps(net, sync, data[1:])
    finally:
        sync.close()
    assert_equals_local_training(net, data)
    n = len(net.parameters())
    assert len(seen) == 2 * n
    if link_free:
        assert first_step == n and [m for m, _ in seen[:n]] == list(range(1, n + 1))
        assert all(q == 0 for _, q in seen)
    else:  # nothing leaves during backward; the queue grows; at finish_step it is cut into
        # messages of at least PUSH_BYTES (push_bytes 0 does not mean one message per gradient):
        # the small net's gradients all fit in one
        assert sum(p.value.nbytes for p in net.parameters()) < PUSH_BYTES
        assert first_step == 1 and all(m == 0 for m, _ in seen[:n])
        queued = [q for _, q in seen[:n]]
        assert queued == sorted(queued) and len(set(queued)) == n
        assert sync.push_messages == 2


class _Raw:
    """A raw DEALER on a shard: requests as any client would write them."""

    def __init__(self, endpoint: str) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        self.sock.connect(f"tcp://{endpoint}")
        self.next_id = 100

    def ask(self, header: dict, arrays=()) -> tuple[dict, list[np.ndarray]]:
        self.next_id += 1
        head = {"id": self.next_id, "job": "local", "rank": 0, **header}
        self.sock.send_multipart(pack(head, list(arrays)))
        assert self.sock.poll(10_000), header
        frames = self.sock.recv_multipart()
        reply = unpack_header(frames[0], request=False)
        assert reply["id"] == self.next_id
        arrays = [
            np.frombuffer(f, np.dtype(d)).reshape(s)
            for f, (d, s, _) in zip(frames[1:], reply["arrays"])
        ]
        return reply, arrays

    def push(self, step: int, blocks: dict, params: list[int], versions=None, grad=2.0):
        """A dense push of ``params`` (their blocks: ``blocks[p]``), every gradient ``grad``."""
        ids = [b for p in params for b in blocks[p]]
        arrays = [np.full((b.stop - b.start, 1), grad) for p in params for b in blocks[p]]
        head = {"op": "push", "step": step, "count": 2, "lr": 0.1, "params": params}
        head["blocks"] = [b.id for b in ids]
        head["versions"] = [0] * len(ids) if versions is None else versions
        return self.ask(head, arrays)[0]

    def values(self, blocks: list) -> np.ndarray:
        reply, arrays = self.ask({"op": "pull", "blocks": [b.id for b in blocks]})
        assert reply["op"] == "ok", reply
        (values,) = arrays  # protocol 3: the blocks' bytes back to back in one frame
        return values.view(np.float64)

    def stats(self) -> dict:
        return self.ask({"op": "stats"})[0]

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()


def _seeded(endpoint: str):
    """A worker that seeded the shard with ``small_net``, a raw socket, and two parameters
    ``p, q`` (indices) with their blocks and initial values."""
    net = small_net()
    sync = insecure_worker([endpoint])
    sync.setup(net.parameters())
    blocks = {i: sync.layout.blocks_on(0, i) for i in range(len(net.parameters()))}
    initial = [p.value.ravel().copy() for p in net.parameters()]
    return sync, _Raw(endpoint), blocks, initial


@pytest.mark.timeout(60)
def test_sync_checks_every_parameter_of_a_push_before_holding_any(shards):
    (endpoint,) = shards.start(1, workers=1)
    sync, raw, blocks, initial = _seeded(endpoint)
    p, q = 0, 1
    try:
        assert raw.push(5, blocks, [q])["op"] == "ok"  # one worker: applied at once
        after = raw.stats()["stats"]
        assert (after["updates"], after["pushes"], after["push_messages"]) == (1, 1, 1)
        reply = raw.push(5, blocks, [p, q])  # p's step 5 is new, q's is done
        assert reply["op"] == "error" and "stale push" in reply["error"], reply
        stats = raw.stats()["stats"]
        np.testing.assert_array_equal(raw.values(blocks[p]), initial[p])  # p untouched
        np.testing.assert_array_equal(raw.values(blocks[q]), initial[q] - 0.1)
    finally:
        raw.close()
        sync.close()
    # the refused push is not counted as pushed (an error instead)
    assert (stats["updates"], stats["pushes"], stats["push_messages"]) == (1, 1, 1)
    assert stats["errors"] == after["errors"] + 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_push_with_non_integer_versions_is_refused_and_not_counted(shards, mode):
    (endpoint,) = shards.start(1, workers=1, mode=mode)
    sync, raw, blocks, initial = _seeded(endpoint)
    p = 2
    try:
        versions = [0.5] + [0] * (len(blocks[p]) - 1)
        reply = raw.push(1, blocks, [p], versions=versions)
        assert reply["op"] == "error" and "'versions' must be a list of integers" in reply["error"]
        stats = raw.stats()["stats"]
        np.testing.assert_array_equal(raw.values(blocks[p]), initial[p])
    finally:
        raw.close()
        sync.close()
    assert (stats["updates"], stats["pushes"], stats["push_messages"]) == (0, 0, 0)
    assert stats["errors"] == 1


@pytest.mark.timeout(60)
def test_async_drops_the_stale_parameter_of_a_push_and_applies_the_other(shards):
    (endpoint,) = shards.start(1, workers=1, mode="async", extra=["--max-staleness", "0"])
    sync, raw, blocks, initial = _seeded(endpoint)
    p, q = 0, 1
    try:
        first = raw.push(1, blocks, [q])  # q's blocks are at version 1 now
        assert first["op"] == "ok" and first["dropped"] == 0
        before = raw.stats()["stats"]
        reply = raw.push(2, blocks, [p, q])  # both sent as of version 0: q is 1 update stale
        stats = raw.stats()["stats"]
        p_now, q_now = raw.values(blocks[p]), raw.values(blocks[q])
    finally:
        raw.close()
        sync.close()
    assert reply["op"] == "ok" and reply["dropped"] == 1
    assert reply["versions"] == [1] * (len(blocks[p]) + len(blocks[q]))
    np.testing.assert_array_equal(p_now, initial[p] - 0.1)  # lr 0.1 x (2.0 / count 2)
    np.testing.assert_array_equal(q_now, initial[q] - 0.1)  # the first push only
    assert stats["updates"] - before["updates"] == 1
    assert stats["drops"] - before["drops"] == 1
    assert stats["push_messages"] - before["push_messages"] == 1


@pytest.mark.timeout(60)
def test_an_async_update_failing_midway_fails_the_job():
    # an in-process shard (real sockets, its own thread), so that its optimizer can be made
    # to fail: no request a worker can send makes a correct optimizer raise
    shard = Shard(ShardConfig(bind="127.0.0.1:0", workers=1, mode="async", insecure=True))
    endpoint = shard.bind()
    server = threading.Thread(target=shard.serve, daemon=True)
    server.start()
    try:
        sync, raw, blocks, _ = _seeded(endpoint)
        p, q = 0, 1
        calls = []
        update = shard.optimizer.update

        def fail_on_q(value, grad, state, grad_scale=1.0):
            calls.append(1)
            if len(calls) > len(blocks[p]):
                raise FloatingPointError("injected")
            update(value, grad, state, grad_scale)

        shard.optimizer.update = fail_on_q
        try:
            reply = raw.push(1, blocks, [p, q])
            later = raw.stats()
            pull = raw.ask({"op": "pull", "blocks": [blocks[p][0].id]})[0]
        finally:
            raw.close()
            sync.close()
    finally:
        shard.stop()
        server.join(10)
        shard.close()
    name = small_net().parameters()[q].name
    expected = f"update of parameter {name} from rank 0 failed on shard 0: FloatingPointError"
    assert reply["op"] == "error" and expected in reply["error"], reply
    assert expected in later["failed"]  # p was updated, q not: nobody may go on from there
    assert pull["op"] == "error" and expected in pull["error"]
