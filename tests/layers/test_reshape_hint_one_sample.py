"""A layer that reads images told of an input one axis short: one sample fed without its
batch axis (``x[None]``, the usual slip of inference) as well as images without their channel
axis (``Reshape(1, ...)``), each only where its fix fits the layer's input channels."""

import numpy as np
import pytest

from distconv import Arg
from distconv.layers import Conv2D, Conv3D, LayerError, MaxPool2D
from distconv.models import lenet

pytestmark = pytest.mark.timeout(60)

BATCH_AXIS = "one sample without its batch axis? x[None] gives it one, shape {}"
CHANNEL_AXIS = "images with no channel axis? Reshape({}) gives them one"


def _refusal(layer, shape: tuple[int, ...]) -> str:
    with pytest.raises(LayerError) as refused:
        layer(Arg(np.zeros(shape, np.float32)))
    return str(refused.value)


def test_one_image_of_a_one_channel_model_is_told_both_fixes():
    """A trained LeNet's single test image, x[0] of shape (1, 8, 8), fed alone: it is most
    likely one sample without its batch axis, and could be images with no channel axis."""
    net = lenet((1, 8, 8), 10)
    image = np.zeros((1, 8, 8), np.float32)
    with pytest.raises(LayerError) as refused:
        net.forward({"image": Arg(image), "label": Arg(np.zeros(1, np.int64))})
    said = str(refused.value)
    assert BATCH_AXIS.format((1, 1, 8, 8)) in said, said
    assert CHANNEL_AXIS.format("1, 8, 8") in said, said


def test_a_three_channel_model_is_told_only_the_batch_axis():
    """Reshape(1, ...) would give a 3-channel layer one channel: a wrong fix, not said."""
    said = _refusal(Conv2D(3, 4, 3), (3, 8, 8))
    assert said.endswith("; " + BATCH_AXIS.format((1, 3, 8, 8))), said
    assert "Reshape" not in said


def test_a_shape_neither_fix_fits_is_told_neither():
    """Five 8x8 planes for a 3-channel layer: neither x[None] (5 channels) nor a channel axis
    of one fits it."""
    said = _refusal(Conv2D(3, 4, 3), (5, 8, 8))
    assert "x[None]" not in said and "Reshape" not in said, said
    assert said.endswith("got shape (5, 8, 8)"), said


def test_a_batch_of_planes_for_one_channel_is_told_only_the_channel_axis():
    said = _refusal(Conv3D(1, 2, 3), (2, 4, 4, 4))
    assert said.endswith("; " + CHANNEL_AXIS.format("1, 4, 4, 4")), said


def test_a_layer_of_unknown_channels_is_told_both():
    """Pooling has no in_channels: both causes are put as questions."""
    said = _refusal(MaxPool2D(2), (3, 8, 8))
    assert said.endswith(
        f"; {BATCH_AXIS.format((1, 3, 8, 8))}; {CHANNEL_AXIS.format('1, 8, 8')}"
    ), said
