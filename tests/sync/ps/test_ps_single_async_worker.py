"""A job of one async worker holds the shards' values after every step: its refresh pulls
nothing.

An async worker's copy of a block is the value of its last reply; only other workers' pushes
move it on. With one worker there are none, so the whole-model pull at each epoch's end, at a
stop and before each checkpoint bought nothing. Checked on real shards: the refresh moves no
byte, and a real pull afterwards changes no value, dense (through the Trainer, with Adam and
weight decay) and sparse (a table's rows, some read and some never).
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import small_net, sparse_table_net

from distconv.arg import Arg
from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync
from distconv.trainer import Trainer

VOCAB, WIDTH, TABLE = 64, 4, "embed.proj0.weight"


def _one_worker(endpoints: list[str], block_bytes: int) -> PServerSync:
    """The job's only worker: Adam with weight decay (state and a decay on every push)."""
    adam = create_optimizer("adam", lr=0.02, weight_decay=1e-3)
    return PServerSync(
        adam, rank=0, world_size=1, pservers=endpoints, insecure=True, timeout=30,
        block_bytes=block_bytes,
    )  # fmt: skip


def _refresh_moves_nothing_and_values_are_the_shards(sync, net) -> None:
    held = {p.name: p.value.copy() for p in net.parameters()}
    before = sync.traffic()["bytes_pulled"]
    sync.refresh_parameters()
    assert sync.traffic()["bytes_pulled"] == before, "a single async worker pulled"
    sync._pull_all()  # the real pull: what the shards hold now
    assert sync.traffic()["bytes_pulled"] > before  # it did go to the shards
    for p in net.parameters():
        np.testing.assert_array_equal(p.value, held[p.name], err_msg=p.name)


@pytest.mark.timeout(120)
def test_one_async_worker_through_the_trainer_holds_the_shards_values(shards):
    endpoints = shards.start(2, workers=1, mode="async")
    net = small_net()
    sync = _one_worker(endpoints, 64)
    try:
        rng = np.random.default_rng(3)
        data = {"image": rng.standard_normal((24, 1, 8, 8)), "label": rng.integers(0, 4, 24)}
        Trainer(net, sync, 8, progress=False).fit(data, epochs=2)
        _refresh_moves_nothing_and_values_are_the_shards(sync, net)
    finally:
        sync.close()


@pytest.mark.timeout(120)
def test_one_async_worker_holds_a_sparse_tables_rows_read_and_unread(shards):
    endpoints = shards.start(2, workers=1, mode="async")
    net = sparse_table_net(VOCAB, WIDTH, 3, seed=3)
    sync = _one_worker(endpoints, 8 * WIDTH * 8)  # 8 rows a block
    try:
        sync.setup(net.parameters())
        rng = np.random.default_rng(4)
        for _ in range(5):
            words = np.unique(rng.integers(0, VOCAB // 2, 6))  # the upper half is never read
            sync.prefetch({TABLE: words})
            sync.start_step(len(words))
            feed = {"words": Arg(ids=words, needs_grad=False)}
            net.forward({**feed, "label": Arg(ids=words % 3, needs_grad=False)})
            net.backward(sync, loss="loss", loss_scale=len(words))
            sync.finish_step()
        _refresh_moves_nothing_and_values_are_the_shards(sync, net)
    finally:
        sync.close()


@pytest.mark.timeout(120)
def test_one_async_worker_whose_step_was_cut_short_pulls_what_the_shards_applied(shards):
    """Its pushes left during backward (``push_bytes=0``) and the shards applied them, but the
    step was abandoned before any reply was written: its copy lags, and a refresh must pull."""
    endpoints = shards.start(2, workers=1, mode="async")
    net = small_net()
    adam = create_optimizer("adam", lr=0.02)
    sync = PServerSync(
        adam, rank=0, world_size=1, pservers=endpoints, insecure=True, timeout=30,
        block_bytes=64, push_bytes=0,
    )  # fmt: skip
    try:
        sync.setup(net.parameters())
        x = np.random.default_rng(5).standard_normal((8, 1, 8, 8))
        sync.start_step(8)
        net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=np.arange(8) % 4)})
        net.backward(sync, loss="loss", loss_scale=8)  # every gradient has left
        sync.abandon_step()  # an error before finish_step: no reply is written
        held = {p.name: p.value.copy() for p in net.parameters()}
        sync.refresh_parameters()
        refreshed = {p.name: p.value.copy() for p in net.parameters()}
        sync._pull_all()  # the real pull: what the shards hold now
        assert any(not np.array_equal(held[n], refreshed[n]) for n in held), "nothing pulled"
        for p in net.parameters():
            np.testing.assert_array_equal(refreshed[p.name], p.value, err_msg=p.name)
    finally:
        sync.close()
