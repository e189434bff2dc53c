"""A sparse table's push goes to each of its shards in one message per shard:
with gradients accumulated, the rows of a step's passes, each pass's prefetch within a shard's
``max_message_bytes``, may pass it together. The worker sent each shard its push in turn; the
shard over its cap refused it, while the others applied theirs, so the table came out of the
failed step half updated. Every shard's push is now checked before the first is sent, and a
prefetch over a cap is refused by the worker, naming it, before any of its rows is recorded.
Outside a step (an evaluation, which pushes nothing, of batches larger than training's) the
rows are pulled in as many requests as the cap needs: the shard refused one over it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.ps.client import PServerSync

#: each shard's --max-message-bytes: 1,136 rows of the table (8 bytes of id + 256 of values)
CAP = 300_000
ROWS, WIDTH = 4096, 32  # float64: 16 blocks of 256 rows (64 KiB), taking turns on 2 shards


@contextlib.contextmanager
def _table_on_two_shards(shards) -> Iterator[tuple[PServerSync, Parameter, list, list]]:
    """A worker set up with the table (row r holding r) on 2 shards capped at CAP, and each
    shard's rows; closed on leaving."""
    endpoints = shards.start(2, workers=1, extra=["--max-message-bytes", str(CAP)])
    table = Parameter(
        "t",
        np.repeat(np.arange(ROWS, dtype=np.float64), WIDTH).reshape(ROWS, WIDTH),
        sparse_rows=True,
    )
    sync = insecure_worker(endpoints, lr=1.0, timeout=20, block_bytes=WIDTH * 8 * 256)
    try:
        sync.setup([table])
        on = [
            np.concatenate([np.arange(b.start, b.stop) for b in sync.layout.blocks_on(s, 0)])
            for s in range(2)
        ]
        yield sync, table, on[0], on[1]
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_a_push_over_one_shards_cap_is_sent_to_no_shard(shards):
    with _table_on_two_shards(shards) as (sync, table, rows0, rows1):
        sync.start_step(1)
        half = len(rows0) // 2  # 1,024 rows: each pass's prefetch fits shard 0's cap
        sync.prefetch({"t": np.concatenate([rows0[:half], rows1[:10]])})
        sync.prefetch({"t": rows0[half:]})
        table.grad[np.concatenate([rows0, rows1[:10]])] = 1.0
        with pytest.raises(SyncError, match=r"2048 rows of t .* 540672 bytes .* 300000"):
            sync.on_gradient(table)
        # neither shard took the step: shard 1 would have updated its 10 rows
        assert [s["updates"] for s in sync.shard_stats()] == [0, 0]
        sync.abandon_step()  # as a script must where its step raised, before it closes


@pytest.mark.timeout(60)
def test_a_prefetch_over_a_cap_is_refused_before_its_rows_are_recorded(shards):
    with _table_on_two_shards(shards) as (sync, table, rows0, rows1):
        sync.start_step(1)
        with pytest.raises(SyncError, match=r"2048 rows of t .* 540672 bytes .* 300000"):
            sync.prefetch({"t": np.concatenate([rows0, rows1[:10]])})
        sync.prefetch({"t": rows1[:10]})  # within the cap: pulled, and pushed alone
        table.grad[rows1[:10]] = 1.0
        sync.on_gradient(table)
        sync.finish_step()
        assert table.value[rows1[0], 0] == rows1[0] - 1 and table.value[rows0[0], 0] == rows0[0]


@pytest.mark.timeout(60)
def test_an_evaluations_rows_over_a_cap_are_pulled_in_several_requests(shards):
    with _table_on_two_shards(shards) as (sync, table, rows0, rows1):
        table.value[...] = -1.0  # what the pull must bring back: each row's own number
        sync.prefetch({"t": np.arange(ROWS)})  # 1,081,344 bytes in all, 540,672 from each shard
        np.testing.assert_array_equal(table.value[:, 0], np.arange(ROWS, dtype=np.float64))


@pytest.mark.timeout(60)
def test_after_a_step_abandoned_an_evaluations_rows_are_pulled_in_pieces(shards):
    """A step that failed (here, its push over a cap) left the worker in the step until the
    next one began: an evaluation's prefetch then was held to a step's one push per shard and
    refused. The Trainer abandons such a step; the evaluation is then pulled."""
    with _table_on_two_shards(shards) as (sync, table, rows0, rows1):
        sync.start_step(1)
        half = len(rows0) // 2
        sync.prefetch({"t": np.concatenate([rows0[:half], rows1[:10]])})
        sync.prefetch({"t": rows0[half:]})
        table.grad[np.concatenate([rows0, rows1[:10]])] = 1.0
        with pytest.raises(SyncError, match="read fewer rows a step"):
            sync.on_gradient(table)
        sync.abandon_step()
        table.value[...] = -1.0
        sync.prefetch({"t": np.arange(ROWS)})  # over each shard's cap: in several pulls
        np.testing.assert_array_equal(table.value[:, 0], np.arange(ROWS, dtype=np.float64))
