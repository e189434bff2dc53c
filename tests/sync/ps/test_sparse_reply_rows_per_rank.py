"""Which rows a sync sparse push's reply carries, per rank, through real shard processes.

Each shard's reply carried the union of every rank's rows, to every rank: a worker's download
per step grew with the number of workers (69.6 / 103 / 171 kB for 1 / 2 / 4 workers on a
100 000 x 32 float32 table read 1 % a step), though each worker prefetches the rows of every
forward anyway. Now only the chief's reply carries the union (its copy of the table is the one
its checkpoints write); any other rank's carries the rows it pushed.
"""

from __future__ import annotations

import threading

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
TABLE_BYTES = ROWS * WIDTH * 8


def _step(sync, params: list[Parameter], rows: dict[str, np.ndarray]) -> None:
    """One step of one example reading ``rows`` (name -> ids) of the sparse ``params`` and
    pushing a gradient of 1 in each of them (and in every element of a dense one)."""
    sync.start_step(1)
    sync.prefetch(rows)
    for p in params:
        p.grad[rows.get(p.name, slice(None))] = 1.0
        sync.on_gradient(p)
    sync.finish_step()


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
                _step(sync, [table], {"table": mine})
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


def _pulled_by_refresh(sync) -> int:
    """The bytes ``sync.refresh_parameters()`` pulled (``traffic()``)."""
    before = sync.traffic()["bytes_pulled"]
    sync.refresh_parameters()
    return sync.traffic()["bytes_pulled"] - before


def _requests_in(sync, call) -> list[int]:
    """Each shard's bytes of requests received from this ``shard_stats()`` to the next, with
    ``call()`` between them."""
    before = [s["bytes_in"] for s in sync.shard_stats()]
    call()
    return [s["bytes_in"] - b for s, b in zip(sync.shard_stats(), before)]


# the table in blocks on both shards, or whole on one (the other holds no sparse block to pull)
@pytest.mark.parametrize("block_bytes", [16 * WIDTH * 8, TABLE_BYTES])
@pytest.mark.timeout(120)
def test_a_refresh_pulls_a_non_chiefs_sparse_tables_alone_once_after_a_step(shards, block_bytes):
    """After a step a rank but the chief holds its table current only in the rows it pushed;
    its refresh pulls the sparse blocks whole (not the dense parameter, current already), and
    a second refresh with no step since pulls nothing. The chief's reply carried every row:
    its refresh pulls nothing."""
    endpoints = shards.start(2, workers=2)
    quiet, asked = threading.Barrier(2), {}

    def rank_fn(rank: int) -> tuple[list[int], np.ndarray]:
        table = Parameter("table", np.zeros((ROWS, WIDTH)))
        table.sparse_rows = True
        dense = Parameter("dense", np.zeros((64, 64)))  # 32 kB: seen if it were pulled too
        sync = insecure_worker(endpoints, rank, 2, timeout=30, block_bytes=block_bytes)
        try:
            sync.setup([table, dense])
            # each shard holds a block: the table's alone on one where it is one block
            assert len({sync.layout.shard_of[b.id] for b in sync.layout.blocks}) == 2
            _step(sync, [table, dense], {"table": np.arange(rank * READ, (rank + 1) * READ)})
            behind = not np.allclose(table.value[: 2 * READ], -0.025)  # both ranks' rows
            pulled: list[int] = []
            if rank == 1:  # the chief waits: the shards hear rank 1 alone
                asked["one"] = _requests_in(sync, lambda: None)  # shard_stats' request alone
                refresh = lambda: pulled.append(_pulled_by_refresh(sync))  # noqa: E731
                asked["refresh"] = _requests_in(sync, refresh)
            quiet.wait(timeout=60)
            pulled += [_pulled_by_refresh(sync) for _ in range(2 - len(pulled))]
            return [behind, *pulled], table.value
        finally:
            sync.close()

    (chief, chief_table), (other, other_table) = run_ranks(rank_fn, 2)
    assert chief == [False, 0, 0]
    assert other[0], "rank 1's step reply carried the chief's rows: nothing to refresh"
    assert TABLE_BYTES < other[1] < TABLE_BYTES + 4_000, other  # ids aside: whole blocks
    assert other[2] == 0
    # the refresh asks the shards holding sparse blocks for them, and no other shard anything
    pulls = [n - one for n, one in zip(asked["refresh"], asked["one"])]
    holds = {s for s in range(2) if block_bytes < TABLE_BYTES or s == 0}
    assert [bool(n) for n in pulls] == [s in holds for s in range(2)], asked
    # lr 0.05 on a gradient of 1 over the step's 2 examples: both ranks' rows, on both ranks
    np.testing.assert_array_equal(other_table, chief_table)
    np.testing.assert_allclose(other_table[: 2 * READ], -0.025)


@pytest.mark.timeout(180)
def test_every_ranks_table_after_fit_equals_one_process(shards):
    """A fit returns the trained model on every rank: each rank reads rows the others do not,
    and a non-chief's step replies carry only its own, so its table is made whole at each
    epoch's refresh; after fit, every rank's whole table equals one process's in float64."""
    world, batch, steps = 3, 4, 6
    rng = np.random.default_rng(4)
    words = rng.integers(0, 300, world * batch * steps)
    train = {"words": words, "label": words % 3}

    def net():
        return sparse_table_net(300, 4, 3, seed=2)

    ref = _trainer(net(), LocalSync(create_optimizer("adagrad", lr=0.1)), world * batch, None)
    ref.fit(train, epochs=2)
    endpoints = shards.start(2, workers=world)
    nets = [net() for _ in range(world)]  # here: set_seed is global

    def rank_fn(rank: int) -> None:
        sync = insecure_worker(
            endpoints, rank, world, optimizer="adagrad", lr=0.1, timeout=30, block_bytes=32 * 4 * 8
        )
        try:
            _trainer(nets[rank], sync, batch, None).fit(train, epochs=2)
        finally:
            sync.close()

    run_ranks(rank_fn, world)
    for rank, got in enumerate(nets):
        for p, q in zip(got.parameters(), ref.network.parameters()):
            np.testing.assert_allclose(
                p.value, q.value, rtol=1e-12, atol=1e-15, err_msg=f"rank {rank}: {p.name}"
            )
