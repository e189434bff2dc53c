"""Fuzz a live CURVE shard with hypothesis while a real worker trains through it.

Random and truncated frames, wrong dtypes (uint8 too), lying shapes, huge sizes, gradient runs
(protocol 4) short, long or cut inside a block, repeated block ids, another worker's key and
unauthenticated connections: the shard answers or drops each message, and the worker's weights
at the end equal single-process training over the same steps, so no bad message touched them.
"""

from __future__ import annotations

import threading

import msgpack
import numpy as np
import pytest
import zmq
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from ps_helpers import batches, small_net, train_steps

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.header_fields import REQUIRED
from distconv.sync.ps.wire import PROTOCOL_VERSION as V
from distconv.sync.ps.wire import pack, unpack_header

OPS = sorted(REQUIRED) + ["nope"]
leaf = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
    | st.text(max_size=8) | st.binary(max_size=8)
)  # fmt: skip
value = st.recursive(
    leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=8,
)  # fmt: skip
array_entry = st.lists(
    st.one_of(st.sampled_from(["float64", "float32", "int64", "uint8", "object", "<U3"]),
              st.lists(st.integers(-1, 2**40), max_size=3), st.integers(-1, 2**40), value),
    min_size=0, max_size=4,
)  # fmt: skip
header = st.fixed_dictionaries(
    {"v": st.sampled_from([V, V, V, 0, V - 1, V + 1, str(V)]), "op": st.sampled_from(OPS),
     "id": st.integers(0, 10**6), "job": st.sampled_from(["local", "local", "other"]),
     "rank": st.sampled_from([0, 0, 1, -1, 7, "0"]), "arrays": st.lists(array_entry, max_size=3)},
    optional={k: value for k in ("step", "count", "lr", "blocks", "versions", "rows", "host",
                                 "description", "digest", "params", "table", "optimizer", "keys",
                                 "tag", "value")},
)  # fmt: skip
frames = st.lists(st.binary(max_size=96), max_size=3)
#: block ids of a well-formed pull or get_state, often repeated (each repeat once cost a copy)
block_ids = st.lists(st.integers(-1, 6), max_size=8)


def _push_frames(rng_bytes: bytes, mutation: int) -> list[bytes]:
    """A well-formed push of parameter 0, then broken one way (``mutation``)."""
    grad = np.frombuffer(rng_bytes.ljust(64, b"\0")[:64], dtype=np.float64).reshape(8, 1)
    parts = pack({"op": "push", "id": 1, "job": "local", "rank": 0, "step": 1, "count": 4,
                  "lr": 0.1, "params": [0], "blocks": [0], "versions": [0]}, [grad])  # fmt: skip
    head = msgpack.unpackb(parts[0])
    data = bytes(parts[1])
    if mutation == 0:  # truncated frame
        data = data[: len(data) // 2]
    elif mutation == 1:  # wrong dtype
        head["arrays"][0][0] = "float32"
    elif mutation == 2:  # a shape that lies about the frame
        head["arrays"][0][1] = [9, 3]
    elif mutation == 3:  # huge claimed size
        head["arrays"][0] = ["float64", [2**40], 2**43]
    elif mutation == 4:  # stale protocol version
        head["v"] = 0
    elif mutation == 5:  # the header itself cut short
        return [msgpack.packb(head)[:-3], data]
    return [msgpack.packb(head), data]


#: how a push's uint8 gradient run is broken, and what the shard's refusal must name
RUN_MUTATIONS = {
    6: "ends inside block",  # the run 8 bytes short
    7: "goes past the push's blocks",  # the run 8 bytes long
    8: "ends inside block",  # two runs, the first cut in the middle of the first block
}


def _run_push_frames(rng_bytes: bytes, mutation: int, blocks: list) -> list[bytes]:
    """A push of parameter 0 (``blocks``: all its blocks, on shard 0) as one uint8 gradient
    run (protocol 4), broken one way (``mutation``, a key of :data:`RUN_MUTATIONS`)."""
    size = sum(b.nbytes for b in blocks)
    run = np.frombuffer(rng_bytes.ljust(size + 8, b"\0")[: size + 8], np.uint8)
    if mutation == 6:
        runs = [run[: size - 8]]
    elif mutation == 7:
        runs = [run]
    else:
        half = blocks[0].nbytes // 2
        runs = [run[:half], run[half:size]]
    head = {"op": "push", "id": 1, "job": "local", "rank": 0, "step": 1, "count": 4, "lr": 0.1}
    head.update(params=[0], blocks=[b.id for b in blocks], versions=[0] * len(blocks))
    return [bytes(f) for f in pack(head, runs)]


def _ask_blocks(fuzzer: Fuzzer, op: str, ids: list[int], rows: bytes | None) -> list[bytes]:
    """A pull (of rows: ``rows`` as uint8 id arrays) or get_state of ``ids``: repeated ids
    are refused, others answered in full or refused, never answered with more blocks."""
    head = {"op": op, "id": 2, "job": "local", "rank": 0, "blocks": ids}
    arrays = []
    if rows is not None:
        arrays = [np.frombuffer(rows, np.uint8)] * len(ids)
        head["rows"] = [len(rows)] * len(ids)
    reply = fuzzer.send(pack(head, arrays), wait=10)
    assert reply is not None
    answer = unpack_header(reply[0], request=False)
    if op == "get_state" and arrays:  # a get_state carries no arrays: refused first (no ids: none)
        assert answer["op"] == "error" and "carries no arrays" in answer["error"], answer
    elif len(set(ids)) != len(ids):
        assert answer["op"] == "error" and "repeat" in answer["error"], answer
    elif answer["op"] == "ok" and op == "pull":
        assert len(answer["versions"]) == len(ids), answer
    return reply


class Fuzzer:
    def __init__(self, endpoint: str, keys: str, rank_key: int | None) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        if rank_key is not None:
            keyfiles.curve_client(self.sock, keyfiles.worker_keys(keys, rank_key))
        self.sock.connect(f"tcp://{endpoint}")

    def send(self, parts: list[bytes], wait: float) -> list[bytes] | None:
        try:  # with no completed handshake there is no peer, and a blocking send would hang
            self.sock.send_multipart(parts or [b""], zmq.NOBLOCK)
        except zmq.Again:
            return None
        if self.sock.poll(wait * 1000):
            return self.sock.recv_multipart()
        return None

    def close(self) -> None:
        self.sock.close(0)
        self.ctx.term()


@pytest.mark.timeout(240)
def test_fuzzed_shard_keeps_serving_a_training_worker(shards, job_keys):
    (endpoint,) = shards.start(1, workers=1, keys=job_keys, extra=["--max-message-bytes", "500000"])
    net = small_net()
    sync = PServerSync(create_optimizer("sgd", lr=0.05), rank=0, world_size=1, pservers=[endpoint],
                       keys_dir=job_keys, timeout=20, block_bytes=64)  # fmt: skip
    sync.setup(net.parameters())
    blocks = sync.layout.blocks_on(0, 0)  # parameter 0's, for pushes of gradient runs
    stop, steps, failure = threading.Event(), [0], []
    data = batches(400, 4)

    def train() -> None:
        try:
            while not stop.is_set() and steps[0] < len(data):
                train_steps(net, sync, [data[steps[0]]])
                steps[0] += 1
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=train, daemon=True)
    worker.start()
    good, wrong_key = Fuzzer(endpoint, job_keys, 0), Fuzzer(endpoint, job_keys, 1)
    stranger = Fuzzer(endpoint, job_keys, None)
    answered = []

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(kind=st.integers(0, 4), head=header, parts=frames, raw=st.binary(max_size=64),
           mutation=st.integers(0, 8), ids=block_ids, op=st.sampled_from(["pull", "get_state"]),
           with_rows=st.booleans())  # fmt: skip
    # a get_state of no blocks with rows: no arrays at all, so answered (found by the fuzzer)
    @example(kind=3, head={}, parts=[], raw=b"", mutation=0, ids=[], op="get_state", with_rows=True)
    def fuzz(kind, head, parts, raw, mutation, ids, op, with_rows):
        if kind == 0:  # garbage frames from an authenticated worker
            reply = good.send([raw, *parts], wait=2)
        elif kind == 1:  # a header of the right shape with random content
            reply = good.send([msgpack.packb(head, use_bin_type=True), *parts], wait=2)
        elif kind == 2 and mutation in RUN_MUTATIONS:  # a gradient run, broken
            reply = broken_run(raw, mutation)
        elif kind == 2:  # a real push, broken
            reply = good.send(_push_frames(raw, mutation), wait=2)
        elif kind == 3:  # a pull or get_state of any block ids, row ids as raw bytes
            reply = _ask_blocks(good, op, ids, raw if with_rows else None)
        else:  # a well-formed request with worker 1's key claiming rank 0
            reply = wrong_key.send(
                pack({"op": "stats", "id": 0, "job": "local", "rank": 0}), wait=2
            )
            assert (
                reply and "another worker's key" in unpack_header(reply[0], request=False)["error"]
            )
        if reply is not None:
            answered.append(unpack_header(reply[0], request=False)["op"])
        # unauthenticated: no CURVE handshake, so nothing reaches the shard and nothing comes back
        assert stranger.send([raw or b"x"], wait=0.02) is None

    def broken_run(raw: bytes, mutation: int) -> list[bytes] | None:
        reply = good.send(_run_push_frames(raw, mutation, blocks), wait=10)
        error = unpack_header(reply[0], request=False) if reply else None
        assert error and RUN_MUTATIONS[mutation] in error.get("error", ""), error
        return reply

    try:
        for mutation in RUN_MUTATIONS:  # each at least once, whatever hypothesis draws
            broken_run(b"\1" * 8, mutation)
        fuzz()
        # a frame past --max-message-bytes: zmq drops the connection before the shard reads it
        assert good.send([b"\x80", b"\0" * 2_000_000], wait=1) is None
    finally:
        for f in (good, wrong_key, stranger):
            f.close()
        stop.set()
        worker.join(60)
    assert not failure, failure
    stats = sync.shard_stats()[0]
    sync.close()
    assert "error" in answered and stats["errors"] >= answered.count("error")
    assert steps[0] > 0
    assert "Traceback" not in shards.log_text()  # every bad message was caught by a check

    # the fuzz never touched the weights: they equal single-process training over those steps
    ref = small_net()
    local = LocalSync(create_optimizer("sgd", lr=0.05))
    local.setup(ref.parameters())
    train_steps(ref, local, data[: steps[0]])
    for p, q in zip(net.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.value, q.value, rtol=1e-10, atol=1e-12)
