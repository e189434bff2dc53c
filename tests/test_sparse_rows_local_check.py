"""``DISTCONV_CHECK_SPARSE_ROWS=1`` under ``LocalSync``: a layer that notes fewer rows of a
sparse table than its backward writes is refused in one process, naming the table and rows.
Only a parameter server's step kept the notes, so such a layer was found only on real shards
(where, unchecked, those rows' updates are held back without a word)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Trainer
from distconv.equivalence import weights
from distconv.layers.written_rows import CHECK_ROWS_VARIABLE, note_rows, take_rows
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from tests.layers.bag_layer import bag_net

DATA = {"ids": np.array([[1, 7], [2, 8], [1, 8], [2, 7]]), "target": np.ones((4, 1))}


def _fit(note: str, tmp_path, accumulate: int = 1) -> dict:
    """Two epochs of a :class:`~tests.layers.bag_layer.Bag` noting ``note`` on LocalSync."""
    net = bag_net(note=note)
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    trainer = Trainer(net, sync, 2, out_dir=tmp_path, progress=False, accumulate=accumulate)
    try:
        trainer.fit(DATA, epochs=2)
    finally:
        sync.close()
    return weights(net)


def test_rows_written_but_not_noted_are_refused_under_the_check(tmp_path, monkeypatch):
    monkeypatch.setenv(CHECK_ROWS_VARIABLE, "1")
    with pytest.raises(SyncError) as refused:
        _fit("first", tmp_path)
    said = str(refused.value)
    assert "bag.table: rows [7, 8] have gradients that no layer noted writing (2 in all" in said
    assert "pass note_rows (distconv.layers.written_rows) every row" in said


@pytest.mark.parametrize("accumulate", [1, 2])
def test_whole_notes_pass_the_check_and_change_no_number(tmp_path, monkeypatch, accumulate):
    unchecked = _fit("all", tmp_path / "unchecked", accumulate)
    monkeypatch.setenv(CHECK_ROWS_VARIABLE, "1")
    checked = _fit("all", tmp_path / "checked", accumulate)
    assert checked.keys() == unchecked.keys()
    for name, value in unchecked.items():
        np.testing.assert_array_equal(checked[name], value, err_msg=name)


def test_without_the_check_one_process_keeps_no_notes(tmp_path):
    """Unset, LocalSync opens no notes: a layer's note costs nothing, and none is left."""
    net = bag_net(note="first")
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    table = net.parameters()[0]
    try:
        sync.setup(net.parameters())
        sync.start_step(1)
        note_rows(table, np.array([1]))
        assert take_rows(table) is None
        sync.finish_step()
    finally:
        sync.close()
