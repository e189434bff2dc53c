"""Sparse rows: a 100 000 x 32 table trains through the shards; bytes follow the rows touched."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from ps_helpers import run_ranks, sparse_table_net

from distconv.arg import Arg
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.ps.client import PServerSync

VOCAB, WIDTH, TABLE = 100_000, 32, "embed.proj0.weight"


def _net(seed: int = 0) -> Network:
    return sparse_table_net(VOCAB, WIDTH, 4, seed=seed)


def _batches(steps: int, size: int, seed: int = 7):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, VOCAB, size) for _ in range(steps)]


def _step(net, sync, words, prefetch=True):
    sync.start_step(len(words))
    if prefetch:
        sync.prefetch({TABLE: words})
    net.forward(
        {"words": Arg(ids=words, needs_grad=False), "label": Arg(ids=words % 4, needs_grad=False)}
    )
    net.backward(sync, loss="loss", loss_scale=len(words))
    sync.finish_step()


def _sync(endpoints, rank, world, lr=0.5):
    return PServerSync(
        create_optimizer("sgd", lr=lr),
        rank=rank,
        world_size=world,
        pservers=endpoints,
        insecure=True,
        timeout=30,
    )


def test_sparse_sgd_through_two_shards_equals_dense_training(shards):
    data = _batches(3, 16)
    ref = _net()
    local = LocalSync(create_optimizer("sgd", lr=0.5))
    local.setup(ref.parameters())
    for words in data:
        _step(ref, local, words, prefetch=False)

    endpoints = shards.start(2, workers=2)
    nets = [_net(seed=r) for r in range(2)]

    def rank_fn(rank):
        sync = _sync(endpoints, rank, 2)
        try:
            sync.setup(nets[rank].parameters())
            for words in data:
                _step(nets[rank], sync, words[rank::2])
            sync.refresh_parameters()  # as the Trainer at an epoch's end: every row current
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
    for net in nets:  # rank 1's replies carried its own rows; the refresh pulled the rest
        for p, q in zip(net.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.value, q.value, rtol=1e-10, atol=1e-12)
    touched = np.unique(np.concatenate(data))
    assert not np.array_equal(
        nets[0].parameters()[0].value[touched], _net().parameters()[0].value[touched]
    )


def test_bytes_per_step_follow_the_rows_touched_not_the_table(shards, capsys):
    (endpoint,) = shards.start(1, workers=1)
    net, sync = _net(), _sync(endpoint and [endpoint], 0, 1)
    try:
        sync.setup(net.parameters())
        table_bytes = VOCAB * WIDTH * 8
        per_step = {}
        for rows in (16, 256, 4096):
            before = sync.shard_stats()[0]
            _step(net, sync, np.random.default_rng(rows).choice(VOCAB, rows, replace=False))
            after = sync.shard_stats()[0]
            per_step[rows] = (
                after["bytes_in"] - before["bytes_in"] + after["bytes_out"] - before["bytes_out"]
            )
    finally:
        sync.close()
    with capsys.disabled():
        print(
            f"\nsparse 100000x32 float64 table ({table_bytes} bytes): bytes in+out per step by "
            f"rows touched: {per_step}"
        )
    row = WIDTH * 8 + 8  # one row of values plus its id, each way: prefetch, push and reply
    for rows, total in per_step.items():
        assert 3 * rows * row <= total <= 4 * rows * row + 20_000
    assert per_step[16] < table_bytes / 1000


def test_the_sparse_set_comes_from_the_model_and_prefetch_checks_names_and_ids(shards):
    (endpoint,) = shards.start(1, workers=1)
    net, sync = _net(), _sync([endpoint], 0, 1)
    try:
        sync.setup(net.parameters())
        assert sync.sparse == {TABLE}
        with pytest.raises(ValueError, match="prefetch: logits.weight is not marked sparse_rows"):
            sync.prefetch({"logits.weight": [0]})
        with pytest.raises(ValueError, match=r"span \[-1, 5\], outside its rows 0..99999"):
            sync.prefetch({TABLE: [5, -1]})
        with pytest.raises(ValueError, match="no parameter 'nope' in this job"):
            sync.prefetch({"nope": [0]})
    finally:
        sync.close()


def test_async_prefetch_brings_the_rows_another_worker_updated(shards):
    # in async mode the shards hold rows this worker has not seen: only the pull brings them
    endpoints = shards.start(2, workers=2, mode="async")
    nets, row = [_net(seed=0), _net(seed=0)], 4321
    updated, arrived = threading.Barrier(2), {}

    def rank_fn(rank):
        sync = _sync(endpoints, rank, 2)
        try:
            sync.setup(nets[rank].parameters())
            table = nets[rank].parameters()[0]
            assert table.name == TABLE
            if rank == 1:
                _step(nets[rank], sync, np.array([row, row + 1]))
                arrived["value"] = table.value[row].copy()
            updated.wait(timeout=60)
            if rank == 0:
                before = table.value[row].copy()
                sync.start_step(1)
                sync.prefetch({TABLE: [row]})
                arrived["before"], arrived["after"] = before, table.value[row].copy()
                sync.finish_step()
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
    assert not np.array_equal(arrived["before"], arrived["value"])  # rank 1 did move the row
    np.testing.assert_array_equal(arrived["after"], arrived["value"])


def test_a_row_with_a_gradient_that_was_not_prefetched_is_an_error(shards):
    # a layer that reads rows its rows_read does not report would lose their updates silently
    (endpoint,) = shards.start(1, workers=1)
    net, sync = _net(), _sync([endpoint], 0, 1)
    try:
        sync.setup(net.parameters())
        words = np.array([1, 5])
        sync.start_step(2)
        sync.prefetch({TABLE: [1]})
        net.forward({"words": Arg(ids=words), "label": Arg(ids=words % 4)})
        with pytest.raises(SyncError, match=r"rows \[5\] have gradients but were not prefetched"):
            net.backward(sync, loss="loss", loss_scale=2)
        sync.abandon_step()  # as a script must where its step raised, before it closes
    finally:
        sync.close()


def test_async_refresh_brings_every_row_before_a_checkpoint(shards):
    # the chief's copy holds only rows it pushed; a checkpoint must hold what the shards hold
    endpoints = shards.start(2, workers=2, mode="async")
    nets, rows = [_net(seed=0), _net(seed=0)], np.array([11, 70_000, 99_999])
    pushed, seen = threading.Barrier(2), {}

    def rank_fn(rank):
        sync = _sync(endpoints, rank, 2)
        try:
            sync.setup(nets[rank].parameters())
            table = nets[rank].parameters()[0]
            if rank == 1:
                _step(nets[rank], sync, rows)
                seen["shards"] = table.value[rows].copy()
            pushed.wait(timeout=60)
            if rank == 0:
                seen["stale"] = table.value[rows].copy()
                sync.refresh_parameters()
                seen["refreshed"] = table.value[rows].copy()
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
    assert not np.array_equal(seen["stale"], seen["shards"])
    np.testing.assert_array_equal(seen["refreshed"], seen["shards"])
