"""``Trainer.evaluate`` refuses an id past what the layer reading its feed takes before its
first batch, as ``fit`` does (:func:`~distconv.data_checks.refuse_ids_out_of_range`), naming
the evaluation set, the feed, the range, the reader and the rows: the layer's own check of
each batch stopped it at the batch that held the row, naming neither the feed nor the row."""

from __future__ import annotations

import pytest

from distconv.data import DataError
from tests.test_id_ranges import MODELS, ROWS, _trainer

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_an_evaluation_sets_id_past_its_range_is_refused_before_its_first_batch(model):
    build, feed, bad, names = MODELS[model]
    net, data = build()
    data[feed][[ROWS - 3, ROWS - 1]] = bad  # in the last batch: the others forward first
    said = rf"^the evaluation set's {feed!r} holds 2 row\(s\) {names}: rows {ROWS - 3}, {ROWS - 1}$"
    with pytest.raises(DataError, match=said):
        _trainer(net).evaluate(data, batch_size=8)


def test_an_evaluation_set_in_range_is_evaluated():
    net, data = MODELS["table"][0]()
    assert set(_trainer(net).evaluate(data, batch_size=8)) == {"test_loss", "test_acc"}
