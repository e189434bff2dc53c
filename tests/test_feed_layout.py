"""Images of another layout than the model's are refused before training in the data's words:
the set, the feed, its example shape, the convolution that reads it and the shape it was built
for, with the transpose to make where the images are channels last. The layer's own refusal,
at the first step, named only the layer (``Conv2D 'conv1': expected 1 input channels, got 8``).
A test set of larger images is told both sets' sizes, not only the layer far on that refused it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from distconv.data import DataError, split, synthetic
from distconv.init import set_seed
from distconv.layers import Conv2D, FullyConnected, Reshape, SoftmaxCrossEntropy
from distconv.models import lenet
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.sync import LocalSync
from distconv.trainer import Trainer


@pytest.fixture(scope="module")
def images():
    """(N, 1, 8, 8) training images and labels of 4 classes, as arrays by feed name."""
    train, _ = split(synthetic(n=64, num_classes=4, seed=3), 0.25, seed=3)
    return {"image": train.x, "label": train.y}


def _trainer(network=None):
    set_seed(0)
    net = network or lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    return Trainer(net, LocalSync(create_optimizer("sgd", lr=0.01)), 16, progress=False)


def _channels_last(arrays):
    return arrays | {"image": np.ascontiguousarray(arrays["image"].transpose(0, 2, 3, 1))}


def test_channels_last_training_images_are_told_the_transpose_before_a_step(images):
    t = _trainer()
    before = [p.value.copy() for p in t.params]
    with pytest.raises(DataError) as refused:
        t.fit(_channels_last(images), epochs=1)
    assert str(refused.value) == (
        "the training set's 'image' holds examples of shape (8, 8, 1), 8 channel(s) on axis 1, "
        "but Conv2D 'conv1', which reads it, was built for 1 channel(s) first, examples of "
        "shape (1, H, W): the images are channels last, it seems (their last axis holds 1); "
        "transpose them to channels first, x.transpose(0, 3, 1, 2)"
    )
    assert t.pos.step == 0 and t.history == []
    assert all(np.array_equal(a, p.value) for a, p in zip(before, t.params))


def test_the_transpose_it_names_makes_the_images_trainable(images):
    """The way out works as said: the transposed images train as the originals do."""
    nhwc = _channels_last(images)["image"]
    said = re.search(r"x\.transpose\((.*)\)", _refusal(_trainer(), {"image": nhwc}, images))
    axes = tuple(int(a) for a in said.group(1).split(", "))
    fixed = images | {"image": np.ascontiguousarray(nhwc.transpose(axes))}
    assert _trainer().fit(fixed, epochs=1)[0]["train_loss"] == pytest.approx(
        _trainer().fit(images, epochs=1)[0]["train_loss"]
    )


def _refusal(trainer, changed, images, test=False):
    train, held = (images, images | changed) if test else (images | changed, None)
    with pytest.raises(DataError) as refused:
        trainer.fit(train, held, epochs=1)
    return str(refused.value)


def test_a_channels_last_test_set_is_named_the_test_set(images):
    said = _refusal(_trainer(), _channels_last(images), images, test=True)
    assert said.startswith("the test set's 'image' holds examples of shape (8, 8, 1)")
    assert said.endswith("x.transpose(0, 3, 1, 2)")


def test_images_of_other_channels_are_told_both_counts_without_a_transpose(images):
    """Three channels first for a model of one: not channels last, so no transpose."""
    rgb = {"image": np.repeat(images["image"], 3, axis=1)}
    assert _refusal(_trainer(), rgb, images) == (
        "the training set's 'image' holds examples of shape (3, 8, 8), 3 channel(s) on axis 1, "
        "but Conv2D 'conv1', which reads it, was built for 1 channel(s) first, examples of "
        "shape (1, H, W): give the images 1 channel(s), or build the model for 3"
    )


def test_a_convolution_built_for_a_size_names_it_and_the_feed_it_reads(images):
    """A convolution given its input size (an unshared bias needs one) names that size; a
    feed of another name than ``image`` is named as it is."""
    net = Network()
    net.add("c", Conv2D(3, 2, 3, padding=1, bias="unshared", input_size=8), "pixels")
    net.add("fc", FullyConnected(2 * 8 * 8, 4), "c")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    rgb_last = np.repeat(_channels_last(images)["image"], 3, axis=3)
    said = _refusal(_trainer(net), {"pixels": rgb_last, "label": images["label"]}, {})
    assert said.startswith("the training set's 'pixels' holds examples of shape (8, 8, 3)")
    assert "Conv2D 'c', which reads it, was built for 3 channel(s) first, examples of " in said
    assert "shape (3, 8, 8): the images are channels last" in said


@pytest.mark.parametrize("size", [12, 16])
def test_a_test_set_of_larger_images_is_told_both_sizes_not_only_the_layer(images, size):
    """16x16 test images for a model and training set of 8x8 were refused by fc1 alone:
    ``FullyConnected 'fc1': expected 32 features per sample``, nothing of the images."""
    bigger = {"image": np.zeros((8, 1, size, size), np.float32), "label": images["label"][:8]}
    said = _refusal(_trainer(), bigger, images, test=True)
    assert said.startswith("the test set does not fit the model: FullyConnected 'fc1': expected")
    assert said.endswith(
        f"; the test set's 'image' holds examples of shape (1, {size}, {size}), the training "
        "set's (1, 8, 8): crop or resize"
    )


def test_check_evaluation_set_names_channels_last_images_of_the_evaluation_set(images):
    """What evaluate asks before a batch: the same words, of the evaluation set."""
    from distconv.data_checks import check_evaluation_set

    net = _trainer().network
    check_evaluation_set(net, images)  # channels first: nothing said
    with pytest.raises(DataError) as refused:
        check_evaluation_set(net, _channels_last(images))
    said = str(refused.value)
    assert said.startswith("the evaluation set's 'image' holds examples of shape (8, 8, 1)")
    assert said.endswith("x.transpose(0, 3, 1, 2)")


def test_evaluate_on_channels_last_images_is_told_the_transpose(images):
    with pytest.raises(DataError, match=r"^the evaluation set's 'image' .*transpose\(0, 3, 1, 2\)"):
        _trainer().evaluate(_channels_last(images))


def test_an_array_named_as_a_layer_is_not_fed_and_not_checked(images):
    """A data set may hold an array no feed reads, under the name of a layer (a Reshape called
    ``image`` over the flat ``pixels``): the convolution reads the layer's output, and the
    set trained before the channel check refused the unfed array as its images."""
    net = Network()
    net.add("image", Reshape(1, 8, 8), "pixels")
    net.add("c", Conv2D(1, 2, 3, padding=1), "image")
    net.add("fc", FullyConnected(2 * 8 * 8, 4), "c")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    flat = images["image"].reshape(len(images["image"]), -1)
    data = {"pixels": flat, "image": _channels_last(images)["image"], "label": images["label"]}
    assert _trainer(net).fit(data, data, epochs=1)[0]["test_loss"] > 0
