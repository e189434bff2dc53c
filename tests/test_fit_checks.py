"""Trainer.fit refuses what it cannot train at the start, naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.init import set_seed
from distconv.models import lenet
from distconv.network import NetworkError
from distconv.optim import create_optimizer
from distconv.sync import create_sync
from distconv.trainer import Trainer


def _trainer(out_dir=None, **kw):
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.01))
    return Trainer(net, sync, 16, out_dir=out_dir, progress=False, **kw)


@pytest.mark.parametrize("epochs", [-1, -3])
def test_a_negative_epoch_count_is_refused_naming_it(small_data, tmp_path, epochs):
    """fit(epochs=-3) returned [] and wrote an empty metrics log, as if all were well."""
    train, test = small_data
    with pytest.raises(ValueError, match=rf"epochs must be an int >= 0, got {epochs}"):
        _trainer(tmp_path).fit(train, test, epochs=epochs)
    assert list(tmp_path.iterdir()) == []


def test_zero_epochs_trains_nothing_and_a_resume_to_zero_restores_only(small_data, tmp_path):
    train, test = small_data
    t = _trainer(tmp_path)
    assert t.fit(train, test, epochs=0) == []
    t.fit(train, test, epochs=1)
    weights = [p.value.copy() for p in t.params]
    again = _trainer(tmp_path)
    assert again.fit(train, test, epochs=0, resume=True) == []
    assert all(np.array_equal(a, p.value) for a, p in zip(weights, again.params))


def _one_hot_regression(n=16, classes=4):
    """An MSE network on one-hot float targets: labels of N*C values, not one id per row."""
    from distconv.layers import FullyConnected, MSELoss
    from distconv.network import Network

    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 3))
    target = np.eye(classes)[rng.integers(0, classes, n)]
    net = Network()
    net.add("fc", FullyConnected(3, classes), "x")
    net.add("loss", MSELoss(), ["fc", "target"])
    return net, {"x": x, "target": target}


@pytest.mark.parametrize("batch_size", [4, 8])
def test_accuracy_with_labels_not_one_per_row_is_refused_naming_the_pair(batch_size):
    """A batch of as many rows as classes compared (N,) answers with (N, C) labels by
    broadcasting: N x C comparisons and an accuracy above 1, silently."""
    from distconv.network import NetworkError

    net, arrays = _one_hot_regression()
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.1))
    t = Trainer(net, sync, batch_size, accuracy=("fc", "target"), progress=False)
    said = r"accuracy=\('fc', 'target'\): labels of shape \(\d+, 4\) for predictions of shape"
    with pytest.raises(NetworkError, match=said):
        t.fit(arrays, epochs=1)


def _images(n, channels, size, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, channels, size, size)).astype(np.float32)
    return {"image": x, "label": rng.integers(0, 4, n)}


@pytest.mark.parametrize(
    "channels,size,said",
    [
        (3, 8, r"the test set's 'image' holds examples of shape \(3, 8, 8\), 3 channel"),
        (1, 12, r"the test set does not fit the model: FullyConnected 'fc1'"),
    ],
)
def test_a_test_set_the_model_cannot_read_is_refused_before_training(
    small_data, tmp_path, channels, size, said
):
    """It failed only in the first epoch's evaluation: the epoch's training was lost and no
    checkpoint written."""
    from distconv.data import DataError

    train, _ = small_data
    t = _trainer(tmp_path)
    before = [p.value.copy() for p in t.params]
    with pytest.raises(DataError, match=rf"^{said}"):
        t.fit(train, _images(8, channels, size), epochs=2)
    assert t.pos.step == 0 and t.history == []
    assert all(np.array_equal(a, p.value) for a, p in zip(before, t.params))


@pytest.mark.parametrize("size", [9, 11])
def test_a_test_set_of_another_example_shape_the_model_reads_is_refused_naming_both(
    small_data, size
):
    """A test set of 9x9 or 11x11 images for a model and training set of 8x8: pooling floors
    both to the size the model expects, so it was evaluated without a word."""
    from distconv.data import DataError

    train, _ = small_data
    t = _trainer()
    said = (
        rf"^the test set's 'image' holds examples of shape \(1, {size}, {size}\), the training "
        r"set's \(1, 8, 8\); give both sets one example shape \(crop or resize\)$"
    )
    with pytest.raises(DataError, match=said):
        t.fit(train, _images(8, 1, size), epochs=1)
    assert t.pos.step == 0 and t.history == []


def test_a_fully_convolutional_model_is_evaluated_on_whole_images_after_crops():
    """Its outputs take the test images' size and are scored against targets of it: the
    test set is the model's own, not one it misreads. It was refused for its image shape."""
    from distconv.layers import Conv2D, MSELoss
    from distconv.network import Network

    rng = np.random.default_rng(0)

    def images(n, size):
        clean = rng.random((n, 1, size, size)).astype(np.float32)
        noisy = clean + 0.1 * rng.standard_normal(clean.shape).astype(np.float32)
        return {"x": noisy, "target": clean}

    net = Network()
    net.add("c1", Conv2D(1, 4, 3, padding=1, act="relu"), "x")
    net.add("c2", Conv2D(4, 1, 3, padding=1), "c1")
    net.add("loss", MSELoss(), ["c2", "target"])
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.05))
    t = Trainer(net, sync, 8, accuracy=None, progress=False)
    crops, whole = images(32, 8), images(8, 12)
    t.fit(crops, whole, epochs=1)
    assert t.history[-1]["test_loss"] == pytest.approx(t.evaluate(whole)["test_loss"])


def test_labels_in_a_column_beside_a_row_of_them_are_the_same_test_set(small_data):
    """Class ids of shape (N, 1) and (N,) are one label each, read alike by the loss: only
    the shapes of values are compared whole, those of ids without their axes of 1."""
    train, test = small_data
    flat = {"image": test.x, "label": test.y}
    column = {"image": test.x, "label": test.y[:, None]}
    records = [_trainer().fit(train, held, epochs=1)[0] for held in (flat, column)]
    assert records[0]["test_loss"] == records[1]["test_loss"]
    assert records[0]["test_acc"] == records[1]["test_acc"]


def test_a_model_that_reads_neither_set_fails_as_its_first_step_would(small_data):
    """The test set is not blamed for a training set the model cannot read either."""
    from distconv.data import DataError
    from distconv.layers.base import LayerError

    wrong = _images(8, 1, 12)  # 12x12 images reach fc1 as 3x3, not the 2x2 it was built for
    with pytest.raises(LayerError, match=r"FullyConnected 'fc1': expected") as raised:
        _trainer().fit(wrong, wrong, epochs=1)
    assert not isinstance(raised.value, DataError)
    # not raised while handling the test set's error: a traceback would start with it
    assert raised.value.__context__ is None and raised.value.__cause__ is None


def test_an_empty_test_set_is_refused_before_training(small_data):
    """evaluate refused it after the first epoch's training."""
    from distconv.data import DataError

    train, test = small_data
    empty = {"image": test.x[:0], "label": test.y[:0]}
    t = _trainer()
    with pytest.raises(DataError, match=r"the test set is empty; pass test=None"):
        t.fit(train, empty, epochs=1)
    assert t.pos.step == 0


def test_a_loss_layer_that_is_no_scalar_is_refused_before_a_step_trains():
    """A "loss" of one value per example: backward seeds every element, so the Trainer
    trained a whole epoch on the gradient of their sum, then failed reading the epoch's loss.
    It now stops at the first forward, naming the layer and its shape."""
    from distconv.layers import FullyConnected
    from distconv.layers.base import LayerError
    from distconv.network import Network

    rng = np.random.default_rng(0)
    net = Network()
    net.add("loss", FullyConnected(3, 2), "x")  # (N, 2): a layer, but no mean loss
    before = net.parameters()[0].value.copy()
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.1))
    t = Trainer(net, sync, 4, accuracy=None, progress=False)
    with pytest.raises(LayerError, match=r"'loss' outputs shape \(4, 2\), not the scalar mean"):
        t.fit({"x": rng.standard_normal((16, 3))}, epochs=1)
    np.testing.assert_array_equal(net.parameters()[0].value, before)  # no step was taken


@pytest.mark.parametrize(
    "given, said",
    [
        ({"batch_size": 4.5}, r"batch_size must be an int >= 1, got 4\.5"),
        ({"batch_size": True}, r"batch_size must be an int >= 1, got True"),
        ({"batch_size": "16"}, r"batch_size must be an int >= 1, got '16'"),
        ({"accumulate": 2.5}, r"accumulate must be an int >= 1, got 2\.5"),
        ({"checkpoint_every": 1.5}, r"checkpoint_every must be an int >= 0, got 1\.5"),
        ({"keep_checkpoints": 0}, r"keep_checkpoints must be an int >= 1, got 0"),
        ({"lr_decay": "0.5"}, r"lr_decay must lie in \(0, 1\], got '0\.5'"),
        ({"accuracy": ("fc2", "labels")}, r"'labels' is neither a layer nor an input"),
        ({"accuracy": ("fc9", "label")}, r"'fc9' is neither a layer nor an input"),
        ({"accuracy": "fc2"}, r"accuracy must be \"auto\", None or a pair of names"),
    ],
)
def test_a_trainer_argument_of_the_wrong_kind_is_refused_naming_it(tmp_path, given, said):
    """A float batch or accumulate count failed at the first epoch with "'float' object cannot
    be interpreted as an integer", batch_size=True trained batches of one, an accuracy pair
    naming no output failed at the first step with a bare KeyError ('labels'; accuracy="fc2"
    with KeyError: 'f'), and keep_checkpoints=0 was called "keep"."""
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.01))
    kw = {"batch_size": 16, "out_dir": tmp_path, **given}
    with pytest.raises(ValueError, match=said):
        Trainer(net, sync, progress=False, **kw)


@pytest.mark.parametrize("epochs, said", [(1.5, r"1\.5"), (True, "True"), ("2", "'2'")])
def test_an_epoch_count_that_is_not_an_int_is_refused(small_data, tmp_path, epochs, said):
    """fit(epochs=1.5) trained two epochs and epochs=True one, without a word; epochs="2" (a
    command-line value not converted) failed with "'<' not supported"."""
    train, test = small_data
    with pytest.raises(ValueError, match=rf"epochs must be an int >= 0, got {said}"):
        _trainer(tmp_path).fit(train, test, epochs=epochs)
    assert list(tmp_path.iterdir()) == []


def test_an_accuracy_pair_of_a_layer_and_an_input_counts_right_answers(small_data):
    train, test = small_data
    history = _trainer(accuracy=("fc2", "label")).fit(train, test, epochs=1)
    assert 0.0 <= history[0]["train_acc"] <= 1.0


@pytest.mark.parametrize(
    "pair, got", [(("loss", "label"), r"shape \(\)"), (("label", "label"), "ids alone")]
)
def test_an_accuracy_pair_of_no_scores_is_refused_naming_it(small_data, pair, got):
    """accuracy=("loss", "label") failed with numpy's "AxisError: axis 1 is out of bounds",
    and ("label", "label") with "'NoneType' object has no attribute 'argmax'": neither named
    the pair."""
    train, test = small_data
    said = rf"accuracy=\('{pair[0]}', 'label'\): '{pair[0]}' gives {got}; accuracy wants"
    with pytest.raises(NetworkError, match=said):
        _trainer(accuracy=pair).fit(train, test, epochs=1)


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_output_directory_is_refused_not_the_current_one(
    small_data, tmp_path, monkeypatch, blank
):
    """out_dir="" (a script's --out "$RUN_DIR" with the variable unset) was Path("") = ".":
    the run's checkpoints, run.lock and metrics went into the current directory, silently.
    """
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"out_dir must name a directory, got '\s*'"):
        _trainer(blank)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sync", ["adam", "optimizer", None])
def test_an_optimizer_given_for_the_sync_is_refused_saying_what_makes_one(sync):
    """Trainer(net, create_optimizer("adam"), 32), as a torch loop takes its optimizer, was
    "AttributeError: 'Adam' object has no attribute 'fetches_rows'"."""
    if sync == "optimizer":
        sync = create_optimizer("adam", lr=0.01)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    said = r"sync must be a sync strategy, such as distconv\.distributed\.init\('adam'"
    with pytest.raises(TypeError, match=said):
        Trainer(net, sync, 16, progress=False)


def test_a_model_that_is_not_a_network_is_refused():
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.01))
    with pytest.raises(TypeError, match=r"network must be a distconv Network .*got dict"):
        Trainer({"fc": None}, sync, 16, progress=False)


def test_an_array_no_layer_reads_may_differ_in_shape_between_the_sets(small_data):
    """A note kept beside the images (float, of another width in each set) is never fed: a
    test set was refused for it, as if its images were of another size."""
    train, test = (
        {"image": s.x, "label": s.y, "note": np.zeros((len(s.y), width), np.float32)}
        for s, width in zip(small_data, (3, 5))
    )
    assert _trainer().fit(train, test, epochs=1)[0]["test_loss"] > 0
