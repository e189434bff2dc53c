"""An async chief's checkpoint holds values and optimizer state of one moment.

The chief pulls every block (``refresh_parameters``, the first thing a checkpoint does), the
shards write their parts, then it gathers the optimizer state (``state_dict``). A push that
lands in between (a rank declared lost, whose pushes are still taken; a worker that drives
``PServerSync`` without the ``Trainer``'s gathers) moved the state one update past the values
the chief had pulled: the resume then applied Adam's moments and ``step`` of one moment to the
values of the moment before. Real shard processes.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, run_ranks, shard_values, small_net, train_steps

from distconv.sync.base import SyncError


@pytest.mark.timeout(90)
def test_the_chiefs_state_and_values_agree_after_a_push_between_pull_and_get_state(shards):
    (endpoint,) = shards.start(1, workers=2, mode="async")
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2, optimizer="adam", lr=0.01) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        train_steps(nets[1], syncs[1], batches(1, 8, seed=1), 1, 2)  # values move
        syncs[0].refresh_parameters()  # the chief's pull: one Adam step in
        pulled = {p.name: p.value.copy() for p in nets[0].parameters()}
        train_steps(nets[1], syncs[1], batches(1, 8, seed=2), 1, 2)  # lands in between
        state = syncs[0].state_dict()
        held = {p.name: p.value.copy() for p in nets[0].parameters()}
        now = shard_values([endpoint])
    finally:
        for s in syncs:
            s.close()
    for name, value in now.items():
        assert int(state[name]["step"]) == 2, (name, state[name]["step"])  # both pushes in
        assert not np.array_equal(pulled[name], value), name  # the second push moved it
        # the values the checkpoint saves are those the state is of: after both pushes
        np.testing.assert_array_equal(held[name], value, name)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("extra", [0, 1])
def test_an_async_cap_must_hold_a_blocks_state_and_values_told_at_setup(shards, extra):
    """Async ``get_state`` carries each block's values too: Adam's two moments, its step and
    the block's values. A cap one byte short of that is refused at setup, not at the first
    checkpoint; a cap that holds them checkpoints."""
    net = small_net()
    largest = max(p.value.nbytes for p in net.parameters())
    cap = 3 * largest + 8 - 1 + extra  # moments, values and the step count, less 1 or not
    (endpoint,) = shards.start(1, workers=1, mode="async", extra=["--max-message-bytes", str(cap)])
    sync = insecure_worker([endpoint], timeout=5, optimizer="adam", block_bytes=2**20)
    try:
        if not extra:
            said = r"of block \d+ of [\w.]+, with its values \(an async checkpoint reads both "
            said += rf"at once\), is {cap + 1} bytes"
            with pytest.raises(SyncError, match=said + f", more than the {cap} of "):
                sync.setup(net.parameters())
            return
        sync.setup(net.parameters())
        state = sync.state_dict()
        assert {p.name for p in net.parameters()} == set(state)
        assert all(int(s["step"]) == 0 for s in state.values())
    finally:
        sync.close()
