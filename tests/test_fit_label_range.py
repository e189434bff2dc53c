"""``Trainer.fit`` refuses a label past the classes its softmax cross-entropy scores before the
first step, naming the set, the feed, the rows and the range. A test set's stopped the fit
only in the first epoch's evaluation, after the whole epoch trained and before its checkpoint
(nothing of it kept); a training set's at whatever step the shuffle reached its row, naming
the batch's range, not the row."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.data import DataError, Dataset
from distconv.data_checks import label_rows_outside
from distconv.layers import FullyConnected, SelectiveFullyConnected, SoftmaxCrossEntropy
from distconv.optim import SGD, create_optimizer
from distconv.sync.local import LocalSync
from tests.sync.threaded_sync import ThreadedSync, run_ranks
from tests.test_researcher_data import _data, _trainer

pytestmark = pytest.mark.timeout(30)

#: what each refusal names: the loss and its classes (the fc's 3 outputs)
SCORES = r"outside \[0, 3\), the classes SoftmaxCrossEntropy 'loss' scores"


@pytest.mark.parametrize("which", ["training", "test"])
def test_a_label_past_the_classes_is_named_by_its_row_before_a_step(which):
    train, test = _data(), _data(16)
    (train if which == "training" else test)["label"][13] = 3
    trainer = _trainer()
    before = trainer.network["fc"].weight.value.copy()
    said = rf"^the {which} set's 'label' holds 1 row\(s\) {SCORES}; its labels lie in "
    said += r"\[0, 3\]: row 13$"
    with pytest.raises(DataError, match=said):
        trainer.fit(train, test, epochs=2)
    assert trainer.pos.step == 0 and trainer.history == []
    np.testing.assert_array_equal(trainer.network["fc"].weight.value, before)


def test_labels_counted_from_one_are_refused_saying_where_class_ids_start():
    """Labels written 1..K: the test set's first row is in range with probability (K-1)/K,
    which was all that fit tried before training."""
    test = _data(16)
    test["label"] += 1
    tops = np.flatnonzero(test["label"] == 3)
    shown = ("row " if len(tops) == 1 else "rows ") + ", ".join(map(str, tops[:5]))
    shown += " ..." if len(tops) > 5 else ""
    said = (
        rf"^the test set's 'label' holds {len(tops)} row\(s\) {SCORES}; its labels lie in "
        rf"\[1, 3\] \(class ids count from 0\): {shown}$"
    )
    with pytest.raises(DataError, match=said):
        _trainer().fit(_data(), test, epochs=1)


def test_a_negative_label_and_labels_in_a_column_are_named_by_their_rows():
    train = _data()
    train["label"] = train["label"].reshape(-1, 1).copy()  # (N, 1): a layout the loss reads
    train["label"][[40, 7]] = [[-1], [-2]]
    said = rf"^the training set's 'label' holds 2 row\(s\) {SCORES}; .* \[-2, 2\]: rows 7, 40$"
    with pytest.raises(DataError, match=said):
        _trainer().fit(train, epochs=1)


def test_a_dataset_of_more_classes_than_the_model_scores_is_refused():
    """A Dataset checks its labels against its own num_classes, not the model's."""
    x, y = np.zeros((30, 1, 2, 2), np.float32), np.arange(30) % 5
    net = Network()
    net.add("fc", FullyConnected(4, 4), "image")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    trainer = Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=8)
    said = r"^the training set's 'label' holds 6 row\(s\) outside \[0, 4\), .*: rows 4, 9, 14, 19, "
    said += r"24 \.\.\.$"
    with pytest.raises(DataError, match=said):
        trainer.fit(Dataset(x, y, 20), epochs=1)


@pytest.mark.parametrize("chunk_bytes", [1, 24, 1 << 20])
def test_labels_outside_the_classes_are_counted_across_chunks(chunk_bytes):
    labels = np.arange(100) % 4
    labels[[3, 50, 51, 90, 97, 98]] = [4, -1, 7, 4, 4, 5]
    count, first, low, high = label_rows_outside(labels, 4, chunk_bytes)
    assert (count, first, low, high) == (6, [3, 50, 51, 90, 97], -1, 7)
    assert label_rows_outside(np.arange(100) % 4, 4, chunk_bytes) == (0, [], 0, 3)


def test_every_rank_refuses_a_bad_test_label_alike_and_none_waits():
    """Each rank holds the whole set, so each finds the same rows after the job check."""
    train, test = _data(), _data(16)
    test["label"][[2, 11]] = 9

    def body(rank, world):
        net = Network()
        net.add("fc", FullyConnected(4, 3), "x")
        net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
        sync = ThreadedSync(create_optimizer("sgd", lr=0.1), world, rank)
        trainer = Trainer(net, sync, batch_size=4)
        with pytest.raises(DataError) as refused:
            trainer.fit(train, test, epochs=1)
        return str(refused.value), trainer.pos.step

    said = (
        "the test set's 'label' holds 2 row(s) outside [0, 3), the classes "
        "SoftmaxCrossEntropy 'loss' scores; its labels lie in [0, 9]: rows 2, 11"
    )
    assert run_ranks(2, body) == [(said, 0), (said, 0)]


def _selected(n: int, k: int, seed: int) -> dict[str, np.ndarray]:
    """Rows of a sampled softmax: ``k`` candidate columns of 50 each, the label the gold
    one's position among them."""
    rng = np.random.default_rng(seed)
    cols = np.stack([rng.choice(50, k, replace=False) for _ in range(n)])
    x = rng.standard_normal((n, 6)).astype(np.float32)
    return {"x": x, "cols": cols, "label": rng.integers(0, k, n)}


def _selective_trainer() -> Trainer:
    net = Network()
    net.add("fc", SelectiveFullyConnected(6, 50), ["x", "cols"])
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    return Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=8, progress=False)


def test_a_test_set_selecting_more_candidates_is_checked_against_its_own_classes():
    """A selective FC scores the columns each row selects: trained on 4 candidates, evaluated
    on 6, a test label of 5 is in range. It was refused against the training set's 4 classes,
    and the test set's 'cols' (6 ids a row) for another example shape than (4,)."""
    train, test = _selected(64, 4, seed=0), _selected(16, 6, seed=1)
    assert test["label"].max() >= 4  # a label the training set's width would refuse
    trainer = _selective_trainer()
    trainer.fit(train, test, epochs=1)
    assert trainer.history[-1]["test_loss"] == pytest.approx(trainer.evaluate(test)["test_loss"])


def test_a_test_label_past_the_candidates_it_selects_is_named_by_its_row():
    test = _selected(16, 6, seed=1)
    test["label"][[0, 5, 9]] = [0, 6, 7]
    said = (
        r"^the test set's 'label' holds 2 row\(s\) outside \[0, 6\), the classes "
        r"SoftmaxCrossEntropy 'loss' scores; its labels lie in \[0, 7\]: rows 5, 9$"
    )
    with pytest.raises(DataError, match=said):
        _selective_trainer().fit(_selected(64, 4, seed=0), test, epochs=1)
