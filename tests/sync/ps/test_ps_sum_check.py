"""The sync NaN/Inf check runs on the ranks' sum of each block: once per block and step, not once
per rank's part, and before any block of the parameter is updated; a failure still names the
rank whose part holds the NaN or Inf (the parts are checked then). An in-process shard on real
sockets, so that its blocks and its checks can be looked at; the workers are real clients."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from ps_helpers import run_ranks, small_net

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.ps import handlers, state
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from distconv.sync.ps.sums import DOT_CHECK_SIZE, _finite

BAD = 2  # the parameter whose gradient goes wrong


def _step(shard: Shard, grads) -> list[tuple[str | None, dict[int, np.ndarray]]]:
    """Two workers run one sync step through ``shard`` with ``grads(rank, i, grad)`` filling
    parameter i's gradient; per rank: the step's error (None if it went through) and, from
    rank 0, the values of the shard's blocks before the step."""

    def rank_fn(rank: int):
        net = small_net()
        sync = PServerSync(
            create_optimizer("sgd", lr=0.05),
            rank=rank,
            world_size=2,
            pservers=[shard.endpoint],
            insecure=True,
            timeout=20,
            block_bytes=64,
        )
        try:
            sync.setup(net.parameters())
            # nothing changes before rank 0 pushes: every update needs both ranks' parts
            before = {b: blk.value.copy() for b, blk in shard.blocks.items()} if rank == 0 else {}
            sync.start_step(4)
            for i, param in enumerate(net.parameters()):
                grads(rank, i, param.grad)
                sync.on_gradient(param)
            try:
                sync.finish_step()
            except SyncError as exc:
                return str(exc), before
            return None, before
        finally:
            sync.close()

    return run_ranks(rank_fn, 2, timeout=60)


@pytest.fixture
def shard():
    shard = Shard(ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, timeout=30))
    shard.bind()
    server = threading.Thread(target=shard.serve, daemon=True)
    server.start()
    yield shard
    shard.stop()
    server.join(10)
    shard.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("bad_rank", "bad", "says"),
    [
        (1, np.nan, "from rank 1 is not finite (NaN/Inf)"),
        (0, -np.inf, "from rank 0 is not finite (NaN/Inf)"),
        (None, 1e308, "from rank 0 is not finite (NaN/Inf), or the ranks' sum of it overflowed"),
    ],
)
def test_a_bad_part_fails_the_step_naming_its_rank_with_no_block_of_it_updated(
    shard, bad_rank, bad, says
):
    def grads(rank, i, grad):
        grad[...] = 0.5
        if i == BAD and bad_rank in (rank, None):  # None: both finite, their sum overflows
            grad.flat[1] = bad

    results = _step(shard, grads)
    name = shard.params[BAD].name
    for message, _ in results:
        assert message is not None and f"gradient of parameter {name} {says}" in message, message
    before = results[0][1]
    for bid in shard.by_param[BAD]:
        assert shard.blocks[bid].version == 0
        np.testing.assert_array_equal(shard.blocks[bid].value, before[bid])


@pytest.mark.timeout(90)
def test_each_block_is_checked_once_per_sync_step_on_the_sum(shard, monkeypatch):
    calls = []

    def counting(grad):
        calls.append(grad.shape)
        return _finite(grad)

    # the shard checked each part as it arrived (handlers) before it checked sums (state)
    monkeypatch.setattr(state, "_finite", counting)
    monkeypatch.setattr(handlers, "_finite", counting)

    def grads(rank, i, grad):
        grad[...] = rank + 1.0

    results = _step(shard, grads)
    assert [message for message, _ in results] == [None, None]
    assert len(calls) == len(shard.blocks)  # 2 ranks, one check each block
    assert all(b.version == 1 for b in shard.blocks.values())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_finite_through_the_dot_product_is_exact(dtype):
    g = np.ones((DOT_CHECK_SIZE // 4, 4), dtype)
    assert _finite(g)
    g[7, 1] = np.finfo(dtype).max  # the dot overflows: the exact test says finite
    g[9, 2] = -np.finfo(dtype).max
    with np.errstate(over="ignore"):  # as the shard's push handler calls it
        assert _finite(g)
        for bad in (np.nan, np.inf, -np.inf):
            g[DOT_CHECK_SIZE // 4 - 1, 3] = bad
            assert not _finite(g)
    assert _finite(np.arange(DOT_CHECK_SIZE, dtype=np.int64))
