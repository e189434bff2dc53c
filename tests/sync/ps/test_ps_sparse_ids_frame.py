"""A sparse block's row ids travel as one frame, 8 bytes a row: the start-up check
holds each block to the shard's frame bound, but a table of rows under 8 bytes (float32, one
column) makes the ids of half a block's rows larger than the block. ZeroMQ dropped that frame
with its connection and the worker's prefetch or push timed out, naming nothing. The worker
now says so before sending; a frame within the bound still goes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.ps.client import PServerSync

MIB = 1 << 20
ROWS = MIB // 4  # a float32 table one column wide: one 1 MiB block, the frame bound


@contextlib.contextmanager
def _table_in_a_step(shards) -> Iterator[tuple[PServerSync, Parameter]]:
    """A worker of one shard bounded at 1 MiB a frame, set up with a float32 table one column
    wide and inside a step of 2 examples; closed on leaving."""
    (endpoint,) = shards.start(1, workers=1, extra=["--max-frame-bytes", str(MIB)])
    table = Parameter("t", np.zeros((ROWS, 1), np.float32), sparse_rows=True)
    # timeout: the error comes at once; where the frame was dropped, this ran out
    sync = insecure_worker([endpoint], lr=0.5, timeout=20, block_bytes=MIB)
    try:
        sync.setup([table])
        sync.start_step(2)
        yield sync, table
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_row_ids_over_the_frame_bound_are_refused_before_they_are_sent(shards):
    with _table_in_a_step(shards) as (sync, table):
        sync.prefetch({"t": np.arange(0, MIB // 8)})  # ids of exactly the bound: they go
        with pytest.raises(SyncError, match=r"row ids of block 0 of t make a frame of 1048584"):
            sync.prefetch({"t": np.arange(0, MIB // 8 + 1)})
        # two passes' rows, each within the bound, pushed together: refused in the callback
        sync.prefetch({"t": np.arange(MIB // 8, MIB // 8 + 1)})
        table.grad[: MIB // 8 + 1] = 1.0
        with pytest.raises(SyncError, match="1048584 bytes, more than the 1048576"):
            sync.on_gradient(table)
        sync.abandon_step()  # as a script must where its step raised, before it closes


@pytest.mark.timeout(60)
def test_a_refused_prefetch_records_none_of_its_rows(shards):
    """The ids check came after the step had recorded the rows: a refused prefetch left rows
    never pulled among those the step pushes, so prefetching fewer afterwards still failed,
    now in the push (``prefetch`` promises nothing half-recorded)."""
    with _table_in_a_step(shards) as (sync, table):
        with pytest.raises(SyncError, match="make a frame of 1048584 bytes"):
            sync.prefetch({"t": np.arange(0, MIB // 8 + 1)})
        sync.prefetch({"t": np.arange(0, MIB // 8)})  # within the bound: pulled, and pushed
        table.grad[: MIB // 8] = 1.0
        sync.on_gradient(table)
        sync.finish_step()  # SGD, lr 0.5, the gradient sum over 2 examples
        assert table.value[0, 0] == -0.25 and table.value[MIB // 8, 0] == 0.0
