"""A test set whose examples hold the training set's values in another shape (``(8, 8)``
images beside rows of 64) is refused with the way out that fits: a reshape, not "crop or
resize", which would change the values (examples of another size get crop or resize:
tests/test_fit_checks.py)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.data import DataError
from distconv.init import set_seed
from distconv.layers import FullyConnected, Reshape, SoftmaxCrossEntropy
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.layers.test_reshape import _data, conv_then_pool

pytestmark = pytest.mark.timeout(60)


def refusal(test_images: np.ndarray) -> str:
    """What fit says of a test set of ``test_images`` beside rows of 64 for training."""
    train = _data(64)
    test = {"img": test_images, "label": train["label"][: len(test_images)]}
    trainer = Trainer(conv_then_pool(), LocalSync(create_optimizer("sgd")), 16, progress=False)
    with pytest.raises(DataError) as refused:
        trainer.fit(train, test, epochs=1)
    assert trainer.history == []
    return str(refused.value)


def test_the_same_values_in_another_shape_are_told_to_reshape():
    said = refusal(_data(8)["img"].reshape(8, 8, 8))
    assert said == (
        "the test set's 'img' holds examples of shape (8, 8), the training set's (64,); give "
        "both sets one example shape (reshape the test set's to (64,): both hold 64 values)"
    )


def flat_refusal(example: tuple[int, ...], axes: tuple[int, ...], unit: int | None = None) -> str:
    """What fit says of a model that flattens each example, trained on examples of shape
    ``example`` and tested on the same examples with their axes put in the order ``axes``, an
    axis of size 1 then inserted at ``unit`` where given."""
    set_seed(0)
    net = Network()
    net.add("flat", Reshape(64), "img")
    net.add("fc", FullyConnected(64, 2), "flat")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    train = {"img": _data(64)["img"].reshape(64, *example), "label": _data(64)["label"]}
    tested = train["img"][:16].transpose(0, *(1 + a for a in axes))
    tested = tested if unit is None else np.expand_dims(tested, 1 + unit)
    trainer = Trainer(net, LocalSync(create_optimizer("sgd")), 16, progress=False)
    with pytest.raises(DataError) as refused:
        trainer.fit(train, {"img": tested, "label": train["label"][:16]}, epochs=1)
    return str(refused.value)


def test_the_same_sizes_in_another_order_are_told_to_transpose_not_only_to_reshape():
    """Images channels last beside the training set's channels first hold as many values: a
    reshape, the only way out said, mixed the axes' values into other images, and the test
    accuracy fell with no error. Where the sizes are the same in another order, the refusal
    says to transpose them where they are the same axes."""
    assert flat_refusal((2, 32), (1, 0)) == (
        "the test set's 'img' holds examples of shape (32, 2), the training set's (2, 32); give "
        "both sets one example shape (transpose the test set's axes to (2, 32) where they are "
        "the same axes in another order, channels last perhaps: a reshape would mix their "
        "values; else reshape them: both hold 64 values)"
    )


def test_an_axis_of_size_1_moved_is_told_to_reshape():
    """One-channel images channels last, ``(8, 8, 1)`` beside ``(1, 8, 8)``: the reshape moves
    no value, so the refusal said it "would mix their values", which it does not."""
    assert flat_refusal((1, 8, 8), (1, 2, 0)) == (
        "the test set's 'img' holds examples of shape (8, 8, 1), the training set's (1, 8, 8); "
        "give both sets one example shape (reshape the test set's to (1, 8, 8): both hold 64 "
        "values)"
    )


def test_the_same_sizes_in_another_order_beside_an_axis_of_size_1_are_told_to_transpose():
    """Channels last with an axis of size 1 more, ``(1, H, W, C)`` for ``(C, H, W)``: only the
    axes moved were read without their axes of size 1, so the sizes, compared with it, were
    not the same, and the refusal said to reshape, which mixes the channels into the pixels.
    A transpose keeps the number of axes: the refusal says to leave that axis out."""
    said = flat_refusal((2, 4, 8), (1, 2, 0), unit=0)
    assert said == (
        "the test set's 'img' holds examples of shape (1, 4, 8, 2), the training set's "
        "(2, 4, 8); give both sets one example shape (transpose the test set's axes, its axes "
        "of size 1 left out or added, to (2, 4, 8) where they are the same axes in another "
        "order, channels last perhaps: a reshape would mix their values; else reshape them: "
        "both hold 64 values)"
    )
