"""At an epoch's end, a Trainer on a parameter server refuses a sparse table still holding a
gradient: rows a layer wrote but neither noted (``note_rows``) nor reported in ``rows_read``,
which the push held back. The first step's check finds such rows only where that step wrote
them; written by a later step, they never trained and the fit ended without a word. A right
layer is not refused: accumulated passes, a short last batch, async mode, an evaluation.
Real shards on 127.0.0.1 (port 0)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Trainer
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from tests.layers.bag_layer import bag_net
from tests.sync.ps.ps_helpers import pserver_sync


def _fit(shards, tmp_path, net, data, mode="sync", test=None, **trainer):
    """One epoch of ``net`` on ``data`` (batch 2) on one worker and one shard in ``mode``."""
    sync = pserver_sync(shards.start(1, 1, mode=mode), create_optimizer("sgd", lr=0.1), 0, 1)
    try:
        Trainer(net, sync, 2, out_dir=tmp_path, progress=False, **trainer).fit(data, test, epochs=1)
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_rows_held_back_after_the_first_step_end_the_epoch_named(shards, tmp_path):
    """Bags of one id bar one, [4, 9]: its step holds row 9 back (the layer notes and reads
    the first column only). At seed 0 that step is the second, past the first step's check."""
    net = bag_net(note="first", read="first")
    data = {"ids": np.array([[1, 1], [2, 2], [3, 3], [4, 9]]), "target": np.ones((4, 1))}
    with pytest.raises(SyncError) as refused:
        _fit(shards, tmp_path, net, data)
    said = str(refused.value)
    assert "sparse table 'bag.table' after an epoch: rows [9] (1 in all) were written" in said
    assert "first step" not in said and "DISTCONV_CHECK_SPARSE_ROWS=1" in said


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("note", ["all", "few", "none"])
def test_a_layer_that_notes_every_row_or_none_is_not_refused(shards, tmp_path, mode, note):
    """Two passes a step, 7 examples (the last step short), a test set evaluated each epoch."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 10, (7, 2))
    ids[:3] = ids[:3, :1]  # bags of one id: the "few" layer notes those passes, not the others
    data = {"ids": ids, "target": rng.standard_normal((7, 1))}
    test = {"ids": rng.integers(0, 10, (3, 2)), "target": np.ones((3, 1))}
    net = bag_net(note=note)
    _fit(shards, tmp_path, net, data, mode, accumulate=2, test=test)
    assert not net.parameters()[0].grad.any()
