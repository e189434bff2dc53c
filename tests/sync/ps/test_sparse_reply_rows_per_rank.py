"""Which rows a sync sparse push's reply carries, per rank, through real shard processes.

Each shard's reply carried the union of every rank's rows, to every rank: a worker's download
per step grew with the number of workers (69.6 / 103 / 171 kB for 1 / 2 / 4 workers on a
100 000 x 32 float32 table read 1 % a step), though each worker prefetches the rows of every
forward anyway. Now only the chief's reply carries the union (its copy of the table is the one
its checkpoints write); any other rank's carries the rows it pushed.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, sparse_table_net

from distconv.checkpoint import load_checkpoint
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.run_dir import RunDirectory
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer

ROWS, WIDTH = 600, 32  # a float64 table of 600 rows: 264 bytes a row with its id
READ = 100  # the rows each worker reads a step, none of them another worker's
ROW_BYTES = 8 + WIDTH * 8


def _pulled_per_step(endpoints: list[str], world: int) -> list[int]:
    """Each rank's bytes pulled (``traffic()``) in the second of two steps that read and push
    ``READ`` rows of its own; the first step holds the start-up."""

    def rank_fn(rank: int) -> int:
        table = Parameter("table", np.zeros((ROWS, WIDTH)))
        table.sparse_rows = True
        mine = np.arange(rank * READ, (rank + 1) * READ)
        sync = insecure_worker(endpoints, rank, world, timeout=30, block_bytes=16 * WIDTH * 8)
        try:
            sync.setup([table])
            pulled = []
            for _ in range(2):
                before = sync.traffic()["bytes_pulled"]
                sync.start_step(1)
                sync.prefetch({"table": mine})
                table.grad[mine] = 1.0
                sync.on_gradient(table)
                sync.finish_step()
                pulled.append(sync.traffic()["bytes_pulled"] - before)
            return pulled[-1]
        finally:
            sync.close()

    return run_ranks(rank_fn, world)


@pytest.mark.timeout(120)
def test_a_non_chief_workers_download_does_not_grow_with_the_workers(shards):
    (alone,) = _pulled_per_step(shards.start(2, workers=1), 1)
    chief, *others = _pulled_per_step(shards.start(2, workers=3), 3)
    # the prefetch's rows and the push's reply, its own rows each: 2 x READ rows, headers aside
    assert 2 * READ * ROW_BYTES < alone < 2 * READ * ROW_BYTES + 4_000
    for pulled in others:  # as much as one worker alone pulls, not the others' rows on top
        assert abs(pulled - alone) < ROW_BYTES, (pulled, alone)
    # the chief's reply carries the other two workers' rows too: its table stays whole
    assert chief - alone > 2 * READ * ROW_BYTES, (chief, alone)


def _trainer(net, sync, batch: int, out) -> Trainer:
    return Trainer(net, sync, batch, out_dir=out, dtype=np.float64, progress=False)


@pytest.mark.timeout(180)
def test_a_sync_checkpoint_after_sparse_steps_equals_one_process(shards, tmp_path):
    """The chief's checkpoint holds the rows every worker trained, as one process's does: each
    rank reads rows the others do not, so a chief whose copy lacked them would save them stale.
    AdaGrad's state of the rows never read stays zero either way (it adds squared gradients),
    so its checkpointed state must equal one process's too."""
    world, batch, steps = 3, 4, 6
    rng = np.random.default_rng(3)
    words = rng.integers(0, 300, world * batch * steps)
    train = {"words": words, "label": words % 3}

    def net():
        return sparse_table_net(300, 4, 3, seed=2)

    ref_out = tmp_path / "one"
    ref = _trainer(net(), LocalSync(create_optimizer("adagrad", lr=0.1)), world * batch, ref_out)
    ref.fit(train, epochs=1)
    endpoints = shards.start(2, workers=world)
    out, nets = tmp_path / "ps", [net() for _ in range(world)]  # here: set_seed is global

    def rank_fn(rank: int) -> None:
        sync = insecure_worker(
            endpoints, rank, world, optimizer="adagrad", lr=0.1, timeout=30, block_bytes=32 * 4 * 8
        )
        try:
            _trainer(nets[rank], sync, batch, out if rank == 0 else None).fit(train, epochs=1)
        finally:
            sync.close()

    run_ranks(rank_fn, world)
    got = load_checkpoint(RunDirectory(out).latest().part("chief"))
    want = load_checkpoint(RunDirectory(ref_out).latest().part("chief"))
    assert got.step == want.step == steps
    assert got.params.keys() == want.params.keys()
    for name, value in want.params.items():
        np.testing.assert_allclose(got.params[name], value, rtol=1e-12, atol=1e-15, err_msg=name)
    table = "embed.proj0.weight"
    for key, value in want.optim_state[table].items():
        np.testing.assert_allclose(got.optim_state[table][key], value, rtol=1e-12, atol=1e-15)
    # every row any rank read was trained, and saved so: not only the chief's own
    trained = np.flatnonzero((got.params[table] != net().parameters()[0].value).any(axis=1))
    np.testing.assert_array_equal(trained, np.unique(words))
