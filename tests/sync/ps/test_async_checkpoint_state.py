"""An async chief's checkpoint moves the model's values once.

``StepCheckpoints.save`` pulled every block (``refresh_parameters``) and then gathered the
state with ``get_state``, which in async mode carries every block's values too:
the whole model crossed the network twice per checkpoint (Adam: 4x the values, now 3x). The
sync contract's ``checkpoint_state()`` makes the parameters current and returns the state; a
parameter server in async mode does both with one ``get_state``. Real shard processes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.resume import Position, StepCheckpoints
from distconv.run_dir import RunDirectory
from distconv.sync.ps.client import PServerSync


def counted(sync: PServerSync) -> Counter:
    """The ops of the requests ``sync`` sends from now on (a wrapper on its ``_send``)."""
    ops: Counter = Counter()
    send = sync._send

    def counting(shard: int, header: dict[str, Any], *args: Any, **kwargs: Any) -> int:
        ops[header["op"], bool(header.get("with_values"))] += 1
        return send(shard, header, *args, **kwargs)

    sync._send = counting
    return ops


def bytes_out(sync: PServerSync) -> int:
    """What the shards have sent so far, in all."""
    return sum(s["bytes_out"] for s in sync.shard_stats())


@pytest.mark.timeout(90)
def test_an_async_checkpoint_moves_the_values_once_and_leaves_them_current(shards, tmp_path):
    endpoints = shards.start(2, workers=2, mode="async")
    # values of 50 kB, a block per parameter: headers are a few percent beside them
    nets = [small_net(seed=r, hidden=512) for r in range(2)]
    syncs = [
        insecure_worker(endpoints, r, 2, optimizer="adam", lr=0.01, block_bytes=2**16)
        for r in range(2)
    ]
    ckpts = StepCheckpoints(RunDirectory(tmp_path), nets[0].parameters(), syncs[0], {"seed": 0})
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        train_steps(nets[1], syncs[1], batches(1, 8, seed=1), 1, 2)  # the chief's values lag
        ckpts.open(False)
        syncs[0].barrier = lambda: None  # rank 1 is not in a checkpoint: nobody to wait for
        values = sum(p.value.nbytes for p in nets[0].parameters())
        ops, before = counted(syncs[0]), bytes_out(syncs[0])
        ckpts.save(Position(0, 1, 1), {})
        sent = bytes_out(syncs[0]) - before
        asked = {op: n for op, n in ops.items() if op[0] != "stats"}
        held = {p.name: p.value.copy() for p in nets[0].parameters()}
        ops.clear()
        syncs[0].refresh_parameters()  # as a stop does after its checkpoint: nothing moved
        after = dict(ops)
        syncs[1].refresh_parameters()  # rank 1 pulls the shards' values now
        now = {p.name: p.value for p in nets[1].parameters()}
    finally:
        ckpts.close()
        for s in syncs:
            s.close()
    # every block's values come with its state, not in a pull before: Adam's two moments and
    # the values (3x), where the pull made it 4x
    assert ("pull", False) not in asked, asked
    assert asked[("get_state", True)] >= 2 and ("get_state", False) not in asked, asked
    print(f"checkpoint: {sent} bytes from the shards, {sent / values:.2f}x the values")
    assert 3 * values <= sent < 3.2 * values, (sent, values)
    assert after == {("stats", False): 2}, after  # the checkpoint's values stand: no pull
    for name, value in now.items():  # the parameters are the shards' values
        np.testing.assert_array_equal(held[name], value, name)


@pytest.mark.timeout(60)
def test_a_sync_jobs_checkpoint_state_is_its_state_alone(shards):
    endpoints = shards.start(1, workers=1)
    net = small_net()
    sync = insecure_worker(endpoints, optimizer="adam", lr=0.01)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 8))
        ops = counted(sync)
        state = sync.checkpoint_state()
        asked = dict(ops)
    finally:
        sync.close()
    assert set(asked) == {("get_state", False)}, asked  # no values, no pull: they are current
    assert all(int(s["step"]) == 1 for s in state.values()), state
