"""A worker checks a sparse reply (``[ids, values]`` per block) before it writes any row.

The reply writer of the real client (:class:`~distconv.sync.ps.inbox.ReplyWriter`) gets a
reply for two blocks of a 6 x 2 table (rows 0:3 and 3:6); every malformed one is refused as a
malformed reply, and the table keeps its values: no id may wrap around, land in another block,
or write rows of another shape or dtype.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from distconv.sync.base import SyncError
from distconv.sync.ps.blocks import Block, ParamSpec
from distconv.sync.ps.inbox import ReplyWriter

BLOCKS = [Block(0, 0, 0, 3, 48), Block(1, 0, 3, 6, 48)]


class _Worker(ReplyWriter):
    """The state :class:`ReplyWriter` reads of its client: one sparse float64 table."""

    rank = 0
    mode = "sync"  # a sparse push's reply: the rows pushed among the other ranks'

    def __init__(self) -> None:
        self.params = [SimpleNamespace(name="t", value=np.zeros((6, 2)))]
        self._specs = [ParamSpec("t", (6, 2), "float64", True)]
        self._host: dict = {}
        self._versions = [0, 0]


def _ids(*ids):
    return np.array(ids, dtype=np.int64)


def _rows(n, dtype=np.float64):
    return np.ones((n, 2), dtype=dtype)


def test_a_well_formed_sparse_reply_writes_its_rows():
    w = _Worker()
    arrays = [_ids(0, 2), _rows(2), _ids(), _rows(0)]
    w._write(BLOCKS, arrays, {"versions": [4, 5], "rows": [2, 0]}, pushed=[_ids(2), _ids()])
    np.testing.assert_array_equal(w.params[0].value[:, 0], [1, 0, 1, 0, 0, 0])
    assert w._versions == [4, 5]


@pytest.mark.parametrize(
    ("arrays", "counts", "message"),
    [
        ([_ids(-1), _rows(1), _ids(3), _rows(1)], [1, 1], "row ids must be 1 int64 in 0:3"),
        ([_ids(4), _rows(1), _ids(5), _rows(1)], [1, 1], "in 0:3"),  # the other block's
        ([_ids(0), _rows(1), _ids(6), _rows(1)], [1, 1], "in 3:6"),  # past the table
        ([_ids(0), _rows(1)], [1, 1], "2 arrays and 2 row counts for 2 blocks"),
        ([_ids(0), _rows(1), _ids(3), _rows(1)], [1], "4 arrays and 1 row counts"),
        ([np.array([0.0]), _rows(1), _ids(3), _rows(1)], [1, 1], "must be 1 int64"),
        ([_ids(0).astype(np.int32), _rows(1), _ids(3), _rows(1)], [1, 1], "must be 1 int64"),
        ([_ids(0).reshape(1, 1), _rows(1), _ids(3), _rows(1)], [1, 1], "must be 1 int64"),
        ([_ids(0, 1), _rows(2), _ids(3), _rows(1)], [1, 1], "must be 1 int64"),  # count lies
        ([_ids(1, 1), _rows(2), _ids(3), _rows(1)], [2, 1], "increase strictly"),
        ([_ids(2, 0), _rows(2), _ids(3), _rows(1)], [2, 1], "increase strictly"),
        ([_ids(0), _rows(2), _ids(3), _rows(1)], [1, 1], r"float64\[2, 2\], expected"),
        ([_ids(0), _rows(1, np.float32), _ids(3), _rows(1)], [1, 1], "float32"),
        ([_ids(0), np.ones(2), _ids(3), _rows(1)], [1, 1], r"float64\[2\], expected"),
        ([_ids(0), np.ones((1, 3)), _ids(3), _rows(1)], [1, 1], r"expected float64\[1, 2\]"),
    ],
)
def test_a_malformed_sparse_reply_is_refused_before_any_row_is_written(arrays, counts, message):
    w = _Worker()
    with pytest.raises(SyncError, match="malformed reply from a pserver: .*" + message):
        w._write(BLOCKS, arrays, {"versions": [1, 1], "rows": counts}, pushed=[_ids(), _ids()])
    np.testing.assert_array_equal(w.params[0].value, 0.0)
    assert w._versions == [0, 0]


@pytest.mark.parametrize(("block", "bad"), [(0, np.nan), (1, np.inf), (1, -np.inf)])
def test_a_sparse_reply_with_a_non_finite_row_is_refused_before_any_row_is_written(block, bad):
    """A NaN or inf in a reply's rows was written into the table."""
    w = _Worker()
    rows = [_rows(1), _rows(1)]
    rows[block][0, 1] = bad
    arrays = [_ids(0), rows[0], _ids(3), rows[1]]
    with pytest.raises(SyncError, match=rf"rank 0: non-finite .* parameter t \(block {block}\)"):
        w._write(BLOCKS, arrays, {"versions": [1, 1], "rows": [1, 1]}, pushed=[_ids(), _ids()])
    np.testing.assert_array_equal(w.params[0].value, 0.0)
    assert w._versions == [0, 0]


@pytest.mark.parametrize("rank", [0, 1])
def test_a_sync_reply_may_list_other_ranks_rows_to_any_rank(rank):
    """In sync mode a shard answers the chief with every rank's rows and another rank with its
    own; a shard of the release before, of the same protocol version, answered every rank with
    every rank's rows. They are the shards' values of the step: written, to any rank (refused,
    the job failed at its first sparse step, after the shards had applied it)."""
    w = _Worker()
    w.rank = rank
    arrays = [_ids(0, 2), _rows(2), _ids(), _rows(0)]  # row 0 is another rank's
    w._write(BLOCKS, arrays, {"versions": [4, 5], "rows": [2, 0]}, pushed=[_ids(2), _ids()])
    np.testing.assert_array_equal(w.params[0].value[:, 0], [1, 0, 1, 0, 0, 0])
    assert w._versions == [4, 5]
