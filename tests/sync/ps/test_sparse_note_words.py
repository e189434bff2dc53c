"""What :func:`~distconv.layers.written_rows.note_rows` refuses, and how a push names rows a
layer noted but never wrote. A boolean mask was taken as the ids 0 and 1 and float ids were
truncated, so other rows than those written were trusted; rows noted beyond what the backward
wrote were refused as "rows ... have gradients ... a layer reads rows its rows_read misses",
which sent the author to a ``rows_read`` that was right. Real shards on 127.0.0.1 (port 0)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.layers.written_rows import note_rows, open_rows, take_rows
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from tests.layers.bag_layer import bag_feeds, bag_net
from tests.sync.ps.ps_helpers import pserver_sync
from tests.sync.ps.test_sparse_noted_rows_check import train_prefetching_before


@pytest.mark.parametrize(
    "rows, dtype",
    [
        (np.array([False, True, True]), "bool"),
        ([2.7, 5.2], "float64"),
        (np.array([1.0]), "float64"),
    ],
)
def test_rows_that_are_no_ids_are_refused_naming_the_table_and_the_dtype(rows, dtype):
    table = Parameter("table", np.zeros((8, 2)), sparse_rows=True)
    with pytest.raises(TypeError, match=rf"note_rows\(table\).*of {dtype}.*np.flatnonzero\(mask\)"):
        note_rows(table, rows)


@pytest.mark.parametrize("rows", [[], np.array([], dtype=np.float64), [5, 1], np.uint8([5, 1])])
def test_integer_ids_and_no_ids_are_taken(rows):
    table = Parameter("table", np.zeros((8, 2)), sparse_rows=True)
    table.shared_count = 1
    open_rows(table)
    note_rows(table, rows)
    table.inc_update(lambda p: None)
    assert take_rows(table).tolist() == sorted(int(r) for r in rows)


@pytest.mark.timeout(60)
def test_rows_noted_but_never_written_are_named_as_noted(shards):
    """A layer noting every row (as a full product does) under a ``rows_read`` of the ids
    it reads: the rows beyond them hold no gradient, and the notes are at fault."""
    net = bag_net(note="every")
    sync = pserver_sync(shards.start(1, 1), create_optimizer("sgd", lr=0.1), 0, 1)
    with pytest.raises(SyncError) as refused:
        train_prefetching_before(net, sync, lambda step: bag_feeds([[3, 4], [5, 6]]), steps=1)
    said = str(refused.value)
    assert (
        "bag.table: rows [0, 1, 2, 7, 8, 9] noted as written (note_rows) hold no gradient" in said
    )
    assert "note only the rows it adds into" in said and "have gradients" not in said
