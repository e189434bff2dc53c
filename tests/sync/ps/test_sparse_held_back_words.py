"""A Trainer's first step on a parameter server where a layer wrote rows of a sparse table it
neither noted (``note_rows``) nor reported in ``rows_read``: the push trusted the notes and held
those rows back, and the step's check found their gradient left. It blamed "a layer added to it
after firing it", a line the layer did not have; it now names the rows, the cause and the check
variable that finds the layer. Real shards on 127.0.0.1 (port 0)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Trainer
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from tests.layers.bag_layer import bag_net
from tests.sync.ps.ps_helpers import pserver_sync


@pytest.mark.timeout(60)
def test_the_first_step_names_the_rows_held_back_and_the_check(shards, tmp_path):
    net = bag_net(note="first", read="first")  # the second column's rows: 7 and 8
    sync = pserver_sync(shards.start(1, 1), create_optimizer("sgd", lr=0.1), 0, 1)
    data = {"ids": np.array([[1, 7], [2, 8]]), "target": np.ones((2, 1))}
    try:
        with pytest.raises(SyncError) as refused:
            Trainer(net, sync, 2, out_dir=tmp_path, progress=False).fit(data, epochs=1)
    finally:
        sync.close()
    said = str(refused.value)
    assert "gradient of 'bag.table' nonzero: rows [7, 8] (2 in all) were written" in said
    assert "neither noted as written (note_rows) nor prefetched" in said
    assert "DISTCONV_CHECK_SPARSE_ROWS=1" in said and "after firing it" not in said


class FetchesAndKeeps(LocalSync):
    """A strategy of one's own that fetches rows and applies each gradient, but zeroes none."""

    fetches_rows = True

    def on_gradient(self, param):
        kept = param.grad.copy()
        super().on_gradient(param)
        param.grad[...] = kept


def test_a_strategy_of_one_s_own_that_zeroes_nothing_is_told_so(tmp_path):
    """Its gradients are left whole, the sparse table's too: the rows are not held back by a
    push, and the note_rows and rows_read advice would send its author to a right layer."""
    sync = FetchesAndKeeps(create_optimizer("sgd", lr=0.1))
    data = {"ids": np.array([[1, 7], [2, 8]]), "target": np.ones((2, 1))}
    with pytest.raises(SyncError) as refused:
        Trainer(bag_net(), sync, 2, out_dir=tmp_path, progress=False).fit(data, epochs=1)
    said = str(refused.value)
    assert "a strategy zeroes each gradient it takes" in said and "note_rows" not in said
