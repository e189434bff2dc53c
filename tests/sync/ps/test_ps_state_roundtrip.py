"""The state PServerSync gathers from real shards (a sparse table's per-row step counts,
``step_per_row``, among it) passes save_checkpoint's checks of optimizer state and comes back
bit for bit, and what a checkpoint holds loads into fresh shards and gathers back the same."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import sparse_table_net, train_sparse_ranks

from distconv.checkpoint import load_checkpoint, save_checkpoint
from distconv.sync.ps.remote_state import PER_ROW

VOCAB, WIDTH = 64, 4
STEPS = [np.random.default_rng(s).integers(0, VOCAB, 8) for s in range(3)]


def _state(endpoints, optimizer: str, steps, start=None):
    """Rank 0's gathered state after ``steps`` on 2 workers; ``start`` is state to load."""
    nets = [sparse_table_net(VOCAB, WIDTH, 3, seed=3) for _ in range(2)]
    # 8 rows a block: blocks step apart
    state = train_sparse_ranks(endpoints, nets, steps, optimizer, start, block_bytes=8 * WIDTH * 8)
    return nets[0], state


def _bits(state):
    return {
        (n, k): (np.asarray(v).dtype.str, np.shape(v), np.asarray(v).tobytes())
        for n, s in state.items()
        for k, v in s.items()
    }


@pytest.mark.timeout(180)
@pytest.mark.parametrize("optimizer", ["adam", "momentum"])
def test_pserver_state_saves_and_restores_bitwise(shards, tmp_path, optimizer):
    net, state = _state(shards.start(2, workers=2), optimizer, STEPS)
    if optimizer == "adam":
        assert len(np.unique(state["embed.proj0.weight"]["step" + PER_ROW])) > 1
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, net.parameters(), state, step=len(STEPS))
    loaded = load_checkpoint(path).optim_state
    assert _bits(loaded) == _bits(state)
    _, again = _state(shards.start(2, workers=2), optimizer, [], start=loaded)
    assert _bits(again) == _bits(state)
