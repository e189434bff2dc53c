"""Predictions without labels: ``Network.forward(feeds, outputs=...)`` runs only the layers an
output needs, and :mod:`distconv.predict` returns the scores or class ids of a trained model,
equal to what the Trainer's evaluation computes."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg
from distconv.data import as_arrays, load_digits
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss
from distconv.models import lenet
from distconv.network import Network, NetworkError
from distconv.optim import create_optimizer
from distconv.predict import predict, predict_classes, scores_layer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer


@pytest.fixture(scope="module")
def trained():
    """LeNet trained one epoch on the digits, and its test set."""
    train, test = load_digits(seed=0)
    set_seed(0)
    net = lenet(train.image_shape, train.num_classes)
    trainer = Trainer(net, LocalSync(create_optimizer("adam")), 32, dtype="float32")
    trainer.fit(train, test, 1)
    return trainer, test


def _evaluated_logits(trainer: Trainer, test) -> np.ndarray:
    """The logits of the whole test set as Trainer.evaluate's one batch of it computed them."""
    trainer.evaluate(as_arrays(test), batch_size=len(test))
    return trainer.network.outputs["fc2"].value.copy()


@pytest.mark.parametrize("batch_size", [1, 7, None])
def test_predictions_are_the_argmax_of_the_logits_evaluate_computes(trained, batch_size):
    trainer, test = trained
    logits = _evaluated_logits(trainer, test)
    size = batch_size or len(test)
    got = predict(trainer.network, test.x, batch_size=size)
    assert got.shape == (len(test), 10) and got.dtype == np.float32
    np.testing.assert_allclose(got, logits, rtol=1e-5, atol=1e-5)
    classes = predict_classes(trainer.network, test.x, batch_size=size)
    np.testing.assert_array_equal(classes, logits.argmax(axis=1))
    assert (classes == test.y).mean() > 0.5  # a trained model, not chance


def test_no_label_is_fed_and_float64_images_are_cast(trained):
    trainer, test = trained
    with pytest.raises(NetworkError, match="input 'label' was not fed"):
        trainer.network.forward({"image": Arg(test.x[:2], needs_grad=False)})
    wide = test.x[:5].astype(np.float64)
    np.testing.assert_array_equal(
        predict_classes(trainer.network, {"image": wide}),
        predict_classes(trainer.network, test.x[:5]),
    )
    assert predict(trainer.network, wide).dtype == np.float32  # the parameters' dtype


def test_predict_keeps_nothing_for_a_backward(trained):
    """A training forward keeps each convolution's column matrices for the weight gradient;
    a prediction's keeps none (forward_only): no memory held for a backward never run."""
    trainer, test = trained
    convs = [trainer.network[name] for name in ("conv1", "conv2")]
    trainer.network.forward({"image": test.x[:3], "label": Arg(ids=test.y[:3])})
    assert all(conv._columns is not None for conv in convs)  # what a prediction must not keep
    predict(trainer.network, test.x[:3])
    assert all(conv._columns is None for conv in convs)


def test_forward_with_outputs_runs_only_the_layers_they_need():
    net = Network()
    net.add("a", FullyConnected(3, 2), inputs="x")
    net.add("b", FullyConnected(4, 2), inputs="z")  # another branch, another feed
    net.add("loss", MSELoss(), inputs=["a", "target"])
    x = np.ones((2, 3), np.float32)
    out = net.forward({"x": x}, outputs=["a"])
    assert set(out) == {"x", "a"}
    with pytest.raises(NetworkError, match="input 'x' was not fed"):
        net.forward({"z": np.ones((2, 4))}, outputs=["a"])
    with pytest.raises(NetworkError, match="no layer or feed 'nope'"):
        net.forward({"x": x}, outputs=["nope"])
    with pytest.raises(NetworkError, match="no one softmax cross-entropy loss"):
        scores_layer(net)
    assert predict(net, x, output="a").shape == (2, 2)
    with pytest.raises(NetworkError, match=r"reads the inputs \['target', 'x'\]"):
        predict(net, x, output="loss")


def test_bad_batch_size_is_refused(trained):
    trainer, test = trained
    with pytest.raises(ValueError, match="batch_size"):
        predict(trainer.network, test.x, batch_size=0)


def test_no_rows_give_no_scores_of_the_output_s_shape(trained):
    """An empty input's scores keep the output's own axes, so its class ids are empty too."""
    trainer, test = trained
    scores = predict(trainer.network, test.x[:0])
    assert scores.shape == (0, 10) and scores.dtype == np.float32
    assert predict_classes(trainer.network, test.x[:0]).shape == (0,)


def test_nested_lists_are_taken_as_arrays(trained):
    trainer, test = trained
    expected = predict(trainer.network, test.x[:3])
    np.testing.assert_array_equal(predict(trainer.network, test.x[:3].tolist()), expected)
    listed = {"image": test.x[:3].tolist()}
    np.testing.assert_array_equal(predict(trainer.network, listed), expected)


@pytest.mark.parametrize("given", [None, 3.5], ids=["None", "a number"])
def test_a_value_of_no_batch_axis_is_refused_naming_its_input(trained, given):
    """np.asarray made it an array of no axes, whose length failed in numpy's words."""
    trainer, _ = trained
    said = rf"^input 'image' is {given!r} \(\w+\), not examples"
    for inputs in (given, {"image": given}):
        with pytest.raises(NetworkError, match=said):
            predict(trainer.network, inputs)
