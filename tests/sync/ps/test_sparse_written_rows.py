"""A sparse push takes the rows a layer said its backward wrote instead of reading the whole
gradient for them, and still refuses a row written but not prefetched.

``SelectiveFullyConnected(sparse=True)`` notes the rows it adds into
(:mod:`distconv.layers.written_rows`); a parameter one of whose users did not note its write
is read whole, as before. Real shards on 127.0.0.1 (port 0).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.equivalence import assert_matches_local
from distconv.layers import (
    FullMatrixProjection,
    FullyConnected,
    Mixed,
    SelectiveFullyConnected,
    SoftmaxCrossEntropy,
    TableProjection,
)
from distconv.layers.written_rows import note_rows, open_rows, take_rows
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.ps.sparse import CHECK_ROWS_VARIABLE
from tests.layers.test_selective_fc_sparse_bias import IN, JOB, sampled_softmax
from tests.sync.ps.ps_helpers import pserver_sync

#: each sample's two selected columns: rows 2, 7 and 9 of the weight and the bias
SELECTED = np.array([[7, 2], [2, 9]])


def _feeds() -> dict:
    x = np.random.default_rng(0).standard_normal((len(SELECTED), IN))
    return {"x": x, "sel": Arg(ids=SELECTED), "label": np.array([0, 1])}


class MissesARow(SelectiveFullyConnected):
    """A layer whose ``rows_read`` leaves out the first column it reads (a bug of its own):
    its forward and backward still use that row."""

    def rows_read(self, feeds):
        return [(name, rows[1:]) for name, rows in super().rows_read(feeds)]


def test_the_rows_a_selective_layer_notes_are_those_it_wrote():
    net = sampled_softmax(0)
    for p in net.parameters():
        open_rows(p)
    net.forward(_feeds())
    net.backward(lambda p: None, loss="loss")
    for p in net.parameters():
        written = np.flatnonzero(np.any(p.grad.reshape(len(p.grad), -1), axis=1))
        assert take_rows(p).tolist() == written.tolist() == [2, 7, 9]


def test_a_selective_layer_without_a_selection_notes_every_row():
    """Its full product writes each row: a step mixing such a pass with a selected one must
    not take the selected pass's rows for all it wrote."""
    net = sampled_softmax(0)
    for p in net.parameters():
        open_rows(p)
    x = _feeds()["x"]
    net["sfc"](Arg(x)).grad = np.ones((len(x), 40))
    net["sfc"].backward(lambda p: None)
    assert [take_rows(p).tolist() for p in net.parameters()] == [list(range(40))] * 2


@pytest.mark.parametrize("passes", [1, 2])
@pytest.mark.parametrize("noting", [(True, False), (False, True), (True, True)])
def test_a_write_one_user_did_not_note_leaves_the_rows_to_be_read(noting, passes):
    """Two users of one table in a pass, in each of ``passes`` accumulated passes: unless
    both noted, nothing noted is trusted (in the second pass of one that does not, the
    noting user is the pass's second as in a whole one: only its place tells them apart)."""
    table = Parameter("table", np.zeros((10, 2)), sparse_rows=True)
    table.shared_count = 2
    open_rows(table)
    for _ in range(passes):
        for user, notes in enumerate(noting):
            table.grad[user] += 1
            if notes:
                note_rows(table, np.array([user]))
            table.inc_update(lambda p: None)
    rows = take_rows(table)
    assert (rows is not None and rows.tolist()) == ([0, 1] if all(noting) else False)


def test_rows_noted_outside_a_step_are_not_kept():
    table = Parameter("table", np.zeros((10, 2)), sparse_rows=True)
    note_rows(table, np.array([3]))
    assert take_rows(table) is None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("check", [None, "1"])
def test_a_row_the_layer_wrote_but_rows_read_missed_is_refused(shards, monkeypatch, check):
    """Without the noted rows' check (or the whole read under the variable) the gradient of
    row 2 was dropped without a word."""
    if check is not None:
        monkeypatch.setenv(CHECK_ROWS_VARIABLE, check)
    net = Network()
    net.add("sfc", MissesARow(IN, 40, sparse=True, dtype=np.float64), ["x", "sel"])
    net.add("loss", SoftmaxCrossEntropy(), ["sfc", "label"])
    sync = pserver_sync(shards.start(1, workers=1), create_optimizer("sgd", lr=0.1), 0, 1)
    try:
        sync.setup(net.parameters())
        sync.start_step(len(SELECTED))
        sync.prefetch(net.rows_needed(_feeds()))
        net.forward(_feeds())
        with pytest.raises(SyncError, match=r"rows \[2\] have gradients but were not prefetched"):
            net.backward(sync, loss="loss")
        sync.abandon_step()
    finally:
        sync.close()


@pytest.mark.timeout(120)
def test_noted_rows_of_accumulated_passes_train_as_one_process(shards):
    """Two passes a step, each noting its rows: float64 SGD on 2 workers and 2 shards ends
    with one process's weights (``test_selective_fc_sparse_bias.py`` runs one pass a step)."""
    make = functools.partial(pserver_sync, shards.start(2, workers=2))
    assert_matches_local(make, 2, dataclasses.replace(JOB, accumulate=2), timeout=90)


def _embedding(tied: bool) -> tuple[Network, Parameter]:
    """A ``sparse=True`` table of 10 rows under a softmax over 10 classes, scored by an output
    projection sharing the table's weight (``tied``: it writes every row without noting), or
    by a layer of its own; and the table's weight."""
    table = TableProjection(10, 3, sparse=True, dtype=np.float64)
    net = Network()
    net.add("embed", Mixed([table]), inputs="words")
    if tied:
        scores = Mixed([FullMatrixProjection(3, 10, weight=table.weight, dtype=np.float64)])
    else:
        scores = FullyConnected(3, 10, dtype=np.float64)
    net.add("scores", scores, inputs="embed")
    net.add("loss", SoftmaxCrossEntropy(), ["scores", "label"])
    return net, table.weight


@pytest.mark.parametrize("tied", [False, True])
def test_a_table_notes_the_ids_it_wrote_unless_a_sharer_did_not(tied):
    """Repeats once, ``-1`` (no row) left out: the rows its prefetch holds. Tied to a full
    projection, the table's rows are left to the scan."""
    net, table = _embedding(tied)
    open_rows(table)
    feeds = {"words": Arg(ids=np.array([[4], [-1], [8], [4]])), "label": np.array([0, 1, 2, 3])}
    net.forward(feeds)
    net.backward(lambda p: None, loss="loss")
    rows = take_rows(table)
    written = np.flatnonzero(table.grad.any(axis=1)).tolist()
    if tied:
        assert rows is None and written == list(range(10))
    else:
        assert rows.tolist() == written == [4, 8]


def test_a_table_s_ids_are_noted_as_they_were_when_a_later_pass_refills_their_array():
    """A loop refilling one id array for each accumulated pass: the table's ids are a view of
    it, and the first pass's rows were read at the take as the second pass's, so rows it
    wrote (prefetched before the step) were neither pushed nor refused."""
    net, table = _embedding(tied=False)
    open_rows(table)
    ids = np.zeros((2, 1), dtype=np.int64)
    feeds = {"words": Arg(ids=ids), "label": np.array([0, 1])}
    for rows in ([[1], [3]], [[5], [7]]):
        ids[...] = rows
        net.forward(feeds)
        net.backward(lambda p: None, loss="loss")
    assert take_rows(table).tolist() == np.flatnonzero(table.grad.any(axis=1)).tolist()


def test_a_slice_noted_is_its_rows_not_every_row():
    """A slice other than EVERY_ROW was read as every row: a step prefetching rows 2 and 3
    alone refused the table's other rows as holding gradients it never wrote."""
    table = Parameter("table", np.zeros((10, 2)), sparse_rows=True)
    open_rows(table)
    note_rows(table, slice(2, 4))
    table.inc_update(lambda p: None)
    assert take_rows(table).tolist() == [2, 3]


def test_a_row_noted_past_the_table_is_refused_by_name():
    """It failed in the push: an IndexError of the prefetched rows' mask, or a refusal of
    "row 9 with a gradient, not prefetched" in a table of 4 rows."""
    table = Parameter("table", np.zeros((4, 2)), sparse_rows=True)
    open_rows(table)
    note_rows(table, np.array([1, 9]))
    table.inc_update(lambda p: None)
    with pytest.raises(ValueError, match=r"table: a layer noted writing rows up to 9, past its 4"):
        take_rows(table)
