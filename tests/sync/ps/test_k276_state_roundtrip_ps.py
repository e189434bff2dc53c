"""Review k276: the state PServerSync gathers from real shards (a sparse table's per-row step
counts, ``step_per_row``, among it) goes through save_checkpoint's k272 checks and back bit for
bit, and what a checkpoint holds loads into fresh shards and gathers back the same."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import run_ranks, sparse_table_net

from distconv.arg import Arg
from distconv.checkpoint import load_checkpoint, save_checkpoint
from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.remote_state import PER_ROW

VOCAB, WIDTH = 64, 4
STEPS = [np.random.default_rng(s).integers(0, VOCAB, 8) for s in range(3)]


def _state(endpoints, optimizer: str, steps, start=None):
    """Rank 0's gathered state after ``steps`` on 2 workers; ``start`` is state to load."""
    nets = [sparse_table_net(VOCAB, WIDTH, 3, seed=3) for _ in range(2)]
    out = {}

    def rank_fn(rank):
        sync = PServerSync(
            create_optimizer(optimizer, lr=0.05),
            rank=rank,
            world_size=2,
            pservers=endpoints,
            insecure=True,
            timeout=30,
            block_bytes=8 * WIDTH * 8,  # 8 rows a block: blocks step apart
        )
        try:
            sync.setup(nets[rank].parameters(), state=start)
            for words in steps:
                mine = words[rank::2]
                sync.prefetch({"embed.proj0.weight": mine})
                sync.start_step(len(mine))
                feed = {"words": Arg(ids=mine, needs_grad=False)}
                feed["label"] = Arg(ids=mine % 3, needs_grad=False)
                nets[rank].forward(feed)
                nets[rank].backward(sync, loss="loss", loss_scale=len(mine))
                sync.finish_step()
            if rank == 0:
                out["state"] = sync.state_dict()
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
    return nets[0], out["state"]


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
