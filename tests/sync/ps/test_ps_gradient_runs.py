"""Protocol 4: a dense push's gradients travel as uint8 runs of whole consecutive blocks.

The worker keeps the gradients of parameters whose blocks all live on one shard back to back in
one buffer (``param.grad`` a view of it), so a push of consecutive parameters is one frame; the
shard splits a run into its blocks without a copy and refuses a run that does not cover exactly
the blocks of the push, then goes on serving a real worker.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ps_helpers import (
    assert_bad_push_refused_then_worker_served,
    assert_equals_local_training,
    batches,
    insecure_worker,
    small_net,
    train_steps,
)

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.sync.ps import channel
from distconv.sync.ps.blocks import BLOCK_BYTES, ParamSpec
from distconv.sync.ps.state import dense_gradients
from distconv.sync.ps.wire import WireError, pack, unpack_header

#: parameter 0: float64, blocks 0 (3 rows) and 1 (2 rows); parameter 1: float32, block 2 (4)
PARAMS = [ParamSpec("a", (5,), "float64"), ParamSpec("b", (4,), "float32")]
BLOCKS = {
    0: SimpleNamespace(param=0, start=0, stop=3),
    1: SimpleNamespace(param=0, start=3, stop=5),
    2: SimpleNamespace(param=1, start=0, stop=4),
}
A, B = np.arange(5.0), np.arange(4, dtype=np.float32) + 10


def _bytes(*arrays) -> np.ndarray:
    return np.frombuffer(b"".join(a.tobytes() for a in arrays), np.uint8)


@pytest.mark.parametrize(
    "frames",
    [
        [_bytes(A, B)],  # one run of every block, dtypes mixed
        [_bytes(A[:3]), _bytes(A[3:]), _bytes(B)],  # a run per block
        [A[:3].reshape(3, 1), _bytes(A[3:], B)],  # a typed block, then a run
        [_bytes(A), B.reshape(4, 1)],
    ],
)
def test_runs_and_typed_blocks_split_into_the_blocks_gradients(frames):
    grads = dense_gradients(BLOCKS, PARAMS, [0, 1, 2], frames)
    for got, want in zip(grads, [A[:3], A[3:], B]):
        assert got.dtype == want.dtype and got.shape == (len(want), 1)
        np.testing.assert_array_equal(got.ravel(), want)
    if len(frames) == 1:  # views of the frame, no copy
        assert all(np.shares_memory(g, frames[0]) for g in grads)


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        ([_bytes(A)[:-8], _bytes(A[4:], B)], "a gradient run of 32 bytes ends inside block 1"),
        ([_bytes(A, B, B[:1])], "a gradient run of 60 bytes goes past the push's blocks"),
        ([_bytes(A)], "push: 1 arrays for 3 blocks cover only the first 2"),
        ([_bytes(A, B), _bytes(B)], "push: array 1 goes past the push's 3 blocks"),
        ([_bytes(A, B), B.reshape(4, 1)], "push: array 1 goes past the push's 3 blocks"),
        ([np.zeros(0, np.uint8), _bytes(A, B)], "must be 1-D uint8 bytes, got shape (0,)"),
        ([_bytes(A, B).reshape(2, 28)], "must be 1-D uint8 bytes, got shape (2, 28)"),
        ([A.reshape(5, 1), _bytes(B)], r"block 0 of a: float64\[5, 1\], expected float64\[3, 1\]"),
    ],
)
def test_a_run_that_does_not_cover_exactly_the_blocks_is_refused(frames, message):
    with pytest.raises(WireError, match=message.replace("(", r"\(").replace(")", r"\)")):
        dense_gradients(BLOCKS, PARAMS, [0, 1, 2], frames)


#: where blocks 0, 1 and 2 start in a run of all three, and where it ends, in bytes
BOUNDS = {0, 24, 40, 56}
REFUSED = re.compile(r"ends inside block \d|goes past the push's|cover only the first \d")


@settings(max_examples=300, deadline=None)
@given(cuts=st.sets(st.integers(1, 71), max_size=5), delta=st.integers(-16, 16))
def test_any_cut_or_truncation_of_runs_is_split_exactly_or_refused(cuts, delta):
    """Runs cut anywhere, the push's bytes truncated or extended by ``delta``: the split is
    exact where every run ends at a block boundary and the bytes are the blocks', else a
    WireError names the cause; never a wrong split."""
    data = np.concatenate([_bytes(A, B), np.full(16, 7, np.uint8)])[: 56 + delta]
    edges = [0, *sorted(c for c in cuts if c < len(data)), len(data)]
    frames = [data[a:b] for a, b in zip(edges, edges[1:])]
    exact = delta == 0 and set(edges) <= BOUNDS
    try:
        grads = dense_gradients(BLOCKS, PARAMS, [0, 1, 2], frames)
    except WireError as exc:
        assert not exact and REFUSED.search(str(exc)), exc
        return
    assert exact, f"runs at {edges} split without an error"
    for got, want in zip(grads, [A[:3], A[3:], B]):
        np.testing.assert_array_equal(got.ravel(), want)


@pytest.mark.timeout(60)
def test_a_push_of_consecutive_parameters_is_one_frame_and_trains_bit_for_bit(shards, monkeypatch):
    sent: list[int] = []
    real_send = channel.send

    def spy(sock, frames, prefix=(), track=False):
        if unpack_header(frames[0], request=False)["op"] == "push":
            sent.append(len(frames) - 1)
        return real_send(sock, frames, prefix=prefix, track=track)

    monkeypatch.setattr(channel, "send", spy)
    data = batches(3, 7)
    net = small_net()
    sync = insecure_worker(shards.start(1, workers=1), block_bytes=BLOCK_BYTES)
    try:
        sync.setup(net.parameters())
        where = sync._runs_of_gradients.where
        (buffer,) = {id(where[i][0]) for i in range(len(net.parameters()))}  # one shard, float64
        assert all(np.shares_memory(p.grad, where[0][0]) for p in net.parameters())
        train_steps(net, sync, data)
        assert sent == [1, 1, 1]  # one push per step (a small model), one gradient frame
        assert not any(p.grad.any() for p in net.parameters())
    finally:
        sync.close()
    ref = small_net()
    local = LocalSync(create_optimizer("sgd", lr=0.05))
    local.setup(ref.parameters())
    train_steps(ref, local, data)
    for p, q in zip(net.parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.value, q.value, err_msg=p.name)


@pytest.mark.timeout(60)
def test_a_run_ending_inside_a_block_is_refused_and_the_shard_serves_a_worker_on(shards):
    def run_one_element_short(head, blocks):
        return pack(head, [np.ones(sum(b.stop - b.start for b in blocks) * 8 - 8, np.uint8)])

    assert_bad_push_refused_then_worker_served(shards, run_one_element_short, "ends inside block")


def test_runs_are_cut_at_the_frame_bound_and_a_larger_parameter_goes_block_by_block():
    from distconv.parameter import Parameter
    from distconv.sync.ps.blocks import Layout
    from distconv.sync.ps.gradients import GradientRuns

    params = [Parameter(f"p{i}", np.full(n, float(i))) for i, n in enumerate([4, 4, 4, 16])]
    specs = [ParamSpec(p.name, p.shape, "float64") for p in params]
    layout = Layout(specs, 1, block_bytes=64)  # p3: 2 blocks of 64 bytes
    runs = GradientRuns(params, [{0}] * 4, [True] * 4)
    items = [
        (i, layout.blocks_on(0, i), [p.grad[b.start : b.stop] for b in layout.blocks_on(0, i)])
        for i, p in enumerate(params)
    ]
    for i, p in enumerate(params):
        p.grad[...] = i + 1
    frames = runs.frames(items, limit=64)
    # p0 + p1 fill one 64-byte run, p2 starts the next; p3 (128 bytes) goes as its 2 blocks
    assert [f.nbytes for f in frames] == [64, 32, 64, 64]
    assert [f.dtype for f in frames] == [np.uint8, np.uint8, np.float64, np.float64]
    got = np.concatenate([np.frombuffer(f.tobytes(), np.float64) for f in frames])
    np.testing.assert_array_equal(got, np.concatenate([p.grad for p in params]))
    assert runs.frames(items[1:3][::-1], limit=1024)[0].nbytes == 32  # not consecutive: 2 runs


def _runs_and_items(params, limit_bytes: int = 64):
    from distconv.sync.ps.blocks import Layout
    from distconv.sync.ps.gradients import GradientRuns

    specs = [ParamSpec(p.name, p.shape, "float64") for p in params]
    layout = Layout(specs, 1, block_bytes=limit_bytes)
    runs = GradientRuns(params, [{0}] * len(params), [True] * len(params))

    def items():
        return [
            (i, layout.blocks_on(0, i), [p.grad[b.start : b.stop] for b in layout.blocks_on(0, i)])
            for i, p in enumerate(params)
        ]

    return runs, items


def test_a_gradient_replaced_after_setup_is_sent_from_its_new_array():
    from distconv.parameter import Parameter

    params = [Parameter(f"p{i}", np.zeros(4)) for i in range(3)]
    runs, items = _runs_and_items(params)
    params[1].set_static(True)  # drops the buffer's view ...
    params[1].set_static(False)  # ... and makes a new gradient array
    for i, p in enumerate(params):
        p.grad[...] = i + 1
    frames = runs.frames(items(), limit=1024)
    got = np.concatenate([np.frombuffer(f.tobytes(), np.float64) for f in frames])
    np.testing.assert_array_equal(got, np.repeat([1.0, 2.0, 3.0], 4))
    assert [f.dtype for f in frames] == [np.uint8, np.float64, np.uint8]


def test_a_gradient_of_another_dtype_than_its_value_is_not_moved():
    from distconv.parameter import Parameter

    params = [Parameter("a", np.zeros(4)), Parameter("b", np.zeros(4))]
    params[1].grad = np.zeros(4, np.float32)
    runs, _ = _runs_and_items(params)
    assert sorted(runs.where) == [0]
    assert params[1].grad.dtype == np.float32 and not np.shares_memory(
        params[1].grad, runs.where[0][0]
    )


@pytest.mark.timeout(60)
def test_gradients_replaced_after_setup_train_like_local_sync(shards):
    data = batches(3, 7)
    net = small_net()
    sync = insecure_worker(shards.start(1, workers=1), block_bytes=BLOCK_BYTES)
    try:
        sync.setup(net.parameters())
        for p in net.parameters()[::2]:  # every other one: moved and replaced interleave
            p.set_static(True)
            p.set_static(False)
        train_steps(net, sync, data)
    finally:
        sync.close()
    assert_equals_local_training(net, data)
