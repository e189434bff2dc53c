"""A pass of an accumulated step in which no user of a sparse table noted its rows leaves the
step's notes untrusted: :func:`~distconv.layers.written_rows.take_rows` returns None and the
push scans the gradient. The passes are counted by ``Parameter.inc_update``; counted inside
``note_rows`` alone, a pass with no note was not seen, the other passes' notes were trusted,
and the rows only it wrote never trained (the run ended without a word). Real shards on
127.0.0.1 (port 0)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.layers.written_rows import note_rows, open_rows, take_rows
from distconv.parameter import Parameter, keep_gradient
from tests.layers.bag_layer import bag_feeds, bag_net
from tests.sync.ps.test_sparse_noted_rows_check import assert_trains_as_one_process

#: a pass reading four rows (the layer's path that forgets to note) and one reading two
FORGETS, NOTES = [[3, 4], [5, 6]], [[1, 1], [2, 2]]


@pytest.mark.parametrize("noted_pass", [0, 1])
def test_a_pass_without_notes_leaves_the_step_s_notes_untrusted(noted_pass):
    """One user, two passes: row 5 written without a note in one, row 1 noted in the other."""
    table = Parameter("table", np.zeros((8, 2)), sparse_rows=True)
    table.shared_count = 1
    open_rows(table)
    for k, row in enumerate([5, 1] if noted_pass else [1, 5]):
        table.grad[row] += 1.0
        if k == noted_pass:
            note_rows(table, np.array([row]))
        table.inc_update(keep_gradient)
    assert take_rows(table) is None


def test_notes_of_every_pass_are_trusted():
    table = Parameter("table", np.zeros((8, 2)), sparse_rows=True)
    table.shared_count = 1
    open_rows(table)
    for row in (5, 1):
        note_rows(table, np.array([row]))
        table.inc_update(keep_gradient)
    assert take_rows(table).tolist() == [1, 5]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("order", ["forgets first", "forgets last"])
def test_a_pass_without_notes_trains_as_one_process(shards, order):
    """Two passes a step, SGD on one worker and one shard against LocalSync: rows 3 to 6,
    written only in the pass that noted nothing, moved under LocalSync and stayed put on the
    shard (their gradient held back in ``p.grad``)."""
    passes = [FORGETS, NOTES] if order == "forgets first" else [NOTES, FORGETS]

    def batch(step: int) -> list[dict]:
        return [bag_feeds(ids) for ids in passes]

    assert_trains_as_one_process(shards, lambda: bag_net(note="few"), batch, "sgd", steps=2)
