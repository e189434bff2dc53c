"""A worker takes a dense parameter's new values as its slice of the reply frame (no copy).

``param.value`` then becomes a view of the frame ZeroMQ received (:meth:`ReplyWriter._adopt`),
the one place the worker replaces a parameter's array; a parameter whose blocks come in several
replies (it spans shards) is still copied into its own array. Either way the layers, which read
``param.value`` through the parameter, train exactly as a single process does.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, small_net, train_steps

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync
from distconv.sync.ps.blocks import BLOCK_BYTES


def _local_reference(data, name: str, hidden: int = 8):
    ref = small_net(hidden=hidden)
    local = LocalSync(create_optimizer(name, lr=0.05))
    local.setup(ref.parameters())
    train_steps(ref, local, data)
    return ref


def _params(seed: int = 0) -> list[Parameter]:
    """Six float64 parameters of 3000 to 8000 elements: each reply frame of a shard is over
    ZeroMQ's in-buffer size, so it is a buffer of its own and aligned for float64."""
    rng = np.random.default_rng(seed)
    return [Parameter(f"p{i}", rng.standard_normal(1000 * (3 + i))) for i in range(6)]


def _step(sync, params, grads) -> None:
    for p, g in zip(params, grads):
        p.grad[...] = g
    sync.start_step(3)
    for p in reversed(params):  # the order backward fires them
        sync.on_gradient(p)
    sync.finish_step()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_whole_parameters_adopt_their_reply_frames_and_step_bit_for_bit(shards, name):
    rng = np.random.default_rng(1)
    steps = [[rng.standard_normal(p.shape) for p in _params()] for _ in range(3)]
    params, ref = _params(), _params()
    sync = insecure_worker(shards.start(2, workers=1), optimizer=name, block_bytes=BLOCK_BYTES)
    local = LocalSync(create_optimizer(name, lr=0.05))
    try:
        sync.setup(params)
        local.setup(ref)
        _step(sync, params, steps[0])
        _step(local, ref, steps[0])
        before = {p.name: (p.value, p.value.copy()) for p in params}
        for grads in steps[1:]:
            _step(sync, params, grads)
            _step(local, ref, grads)
        for p, q in zip(params, ref):
            old, old_values = before[p.name]
            assert p.value is not old, p.name  # a view of its reply, not the old array
            np.testing.assert_array_equal(old, old_values)  # which nothing wrote into
            assert p.value.flags.writeable and p.value.flags.c_contiguous
            assert p.value.shape == old.shape and p.value.dtype == old.dtype
            np.testing.assert_array_equal(p.value, q.value, err_msg=p.name)
            assert not p.grad.any(), p.name  # zero again for the next step
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_a_network_trains_bit_for_bit_whatever_its_parameters_adopt(shards):
    """Layers read ``param.value`` through the parameter: adopted or copied, every step sees
    the new values. With 256 hidden units each shard's reply frame (24 KiB and 12 KiB) is over
    ZeroMQ's 8 KiB receive buffer, so a buffer of its own, aligned, and the parameters adopt
    their slices (a small frame lies inside that buffer, often unaligned: it is copied)."""
    data = batches(3, 7)
    net = small_net(hidden=256)
    sync = insecure_worker(shards.start(2, workers=1), block_bytes=BLOCK_BYTES)
    try:
        sync.setup(net.parameters())
        original = {p.name: p.value for p in net.parameters()}
        train_steps(net, sync, data)
    finally:
        sync.close()
    adopted = [p.name for p in net.parameters() if p.value is not original[p.name]]
    assert "fc1.weight" in adopted, adopted
    for p in net.parameters():
        if p.name in adopted:  # a view of a received frame, not an array of its own
            assert p.value.base is not None and not p.value.flags.owndata, p.name
    ref = _local_reference(data, "sgd", hidden=256)
    for p, q in zip(net.parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.value, q.value, err_msg=p.name)


@pytest.mark.timeout(60)
def test_parameters_spanning_shards_are_written_in_place(shards):
    data = batches(2, 7)
    endpoints = shards.start(2, workers=1)
    net = small_net()
    sync = insecure_worker(endpoints, block_bytes=64)  # most parameters span both shards
    try:
        sync.setup(net.parameters())
        spanning = [
            p
            for i, p in enumerate(net.parameters())
            if len({sync.layout.shard_of[b.id] for b in sync.layout.blocks if b.param == i}) > 1
        ]
        assert spanning
        arrays = {p.name: p.value for p in spanning}
        train_steps(net, sync, data)
        for p in spanning:
            assert p.value is arrays[p.name], p.name
    finally:
        sync.close()
    ref = _local_reference(data, "sgd")
    for p, q in zip(net.parameters(), ref.parameters()):
        np.testing.assert_array_equal(p.value, q.value, err_msg=p.name)
