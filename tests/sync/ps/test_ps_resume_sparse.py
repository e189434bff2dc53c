"""Sparse Adam resume is exact: k steps, checkpoint, resume on fresh shards, m more steps equals
k + m uninterrupted steps, bit for bit, through real shard processes.

A sparse table's blocks take Adam steps only when a row of theirs is touched, so their step
counts differ; the gathered state must carry them (``step_per_row``), or the bias correction
of the resumed run drifts from the uninterrupted one.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import sparse_table_net, train_sparse_ranks

from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.remote_state import PER_ROW

VOCAB, WIDTH, TABLE = 400, 4, "embed.proj0.weight"
STEPS = [np.random.default_rng(s).integers(0, VOCAB, 12) for s in range(6)]


def _net() -> Network:
    return sparse_table_net(VOCAB, WIDTH, 3, seed=3)


def _train(endpoints, steps, start=None):
    """2 workers on ``endpoints``; ``start`` = (weights, optimizer state) of a checkpoint.

    Returns rank 0's weights and the state it gathers from the shards at the end.
    """
    nets = [_net() for _ in range(2)]
    if start is not None:
        for p in nets[0].parameters():
            p.value[...] = start[0][p.name]
    # 8 rows a block: 50 blocks, most untouched each step
    state = train_sparse_ranks(
        endpoints, nets, steps, "adam", start[1] if start else None, block_bytes=8 * WIDTH * 8
    )
    return {p.name: p.value.copy() for p in nets[0].parameters()}, state


@pytest.mark.timeout(180)
def test_sparse_adam_resume_equals_an_uninterrupted_run_bitwise(shards):
    straight, _ = _train(shards.start(2, workers=2), STEPS)

    weights, state = _train(shards.start(2, workers=2), STEPS[:3])
    counts = state[TABLE]["step" + PER_ROW]
    # the blocks really hold different counts (else this test would prove nothing)
    assert counts.shape == (VOCAB,) and len(np.unique(counts)) > 2
    assert state[TABLE]["step"] == counts.max()

    resumed, _ = _train(shards.start(2, workers=2), STEPS[3:], start=(weights, state))
    for name, value in straight.items():
        np.testing.assert_array_equal(resumed[name], value, err_msg=name)


def test_a_checkpoint_whose_rows_disagree_within_a_block_is_refused(shards):
    """A layout change that merges blocks of different counts cannot be restored exactly."""
    endpoints = shards.start(1, workers=1)
    net = _net()
    sync = PServerSync(
        create_optimizer("adam", lr=0.05),
        rank=0,
        world_size=1,
        pservers=endpoints,
        insecure=True,
        block_bytes=8 * WIDTH * 8,
    )
    try:
        sync.setup(net.parameters())
        state = sync.state_dict()
        state[TABLE]["step" + PER_ROW][3] = 7  # row 3 of block 0 disagrees with rows 0..7
        with pytest.raises(ValueError, match=r"rows 0:8 of embed.proj0.weight.*'step'"):
            sync.load_state_dict(state)
    finally:
        sync.close()


def test_a_strategy_holding_tables_whole_loads_a_parameter_server_state():
    # a parameter server saves per-row step counts for a sparse table; local (and MPI) training
    # keeps one count per table and must still load such a checkpoint
    from distconv.parameter import Parameter
    from distconv.sync.local import LocalSync

    table = Parameter("t", np.zeros((4, 2)), sparse_rows=True)
    sync = LocalSync(create_optimizer("adam"))
    sync.setup([table])
    state = {"t": {k: np.asarray(v).copy() for k, v in sync.state_dict()["t"].items()}}
    state["t"]["m"] = np.ones((4, 2))
    state["t"]["step" + PER_ROW] = np.array([3.0, 1.0, 3.0, 0.0])
    sync.load_state_dict(state)
    np.testing.assert_array_equal(sync.state_dict()["t"]["m"], np.ones((4, 2)))
