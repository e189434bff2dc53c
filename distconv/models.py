"""Ready-made networks. Each takes the input shape, so one definition serves several data sets."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from typing import Any

from distconv.kernels.shape import is_int
from distconv.layers.conv import Conv2D
from distconv.layers.fc import FullyConnected
from distconv.layers.loss import SoftmaxCrossEntropy
from distconv.layers.pool import MaxPool2D
from distconv.network import Network, NetworkError

#: the names of the feeds every classifier here reads
IMAGE, LABEL = "image", "label"


def lenet(
    image_shape: Sequence[int] = (1, 8, 8),
    num_classes: int = 10,
    channels: Sequence[int] = (32, 64),
    hidden: int = 128,
) -> Network:
    """A LeNet-style classifier: two conv/relu/max-pool stages, two fully connected layers.

    ``conv 3x3 pad 1 -> relu -> maxpool 2`` twice, then ``fc -> relu -> fc`` and a softmax
    cross-entropy loss. The padding keeps the size through each convolution and each pool halves
    it, so 8x8 digits reach the classifier as 2x2 and 28x28 MNIST as 7x7.

    Args:
        image_shape: (C, H, W) of one input image.
        num_classes: outputs of the last layer.
        channels: output channels of each conv/relu/max-pool stage, one stage per entry.
        hidden: width of the hidden fully connected layer.

    Returns:
        A network fed ``"image"`` (an ``(N, C, H, W)`` Arg) and ``"label"`` (an Arg whose
        ``ids`` are the classes), with layers ``conv1, pool1, conv2, pool2, fc1, fc2, loss``.

    Raises:
        NetworkError: an argument that is no size (an int >= 1), an ``image_shape`` of other
            than three sizes, or one too small for the pooling stages.
    """
    # each taken once, as a tuple: an iterator (map(int, ...)) was used up by the check and no
    # stage built, or had no len(); channels=32 failed "'int' object is not iterable", unnamed
    image_shape, channels = _sizes("image_shape", image_shape), _sizes("channels", channels)
    if len(image_shape) != 3:  # unpacked below: "not enough values to unpack (expected 3)"
        raise NetworkError(f"LeNet: image_shape must be (C, H, W), got {image_shape}")
    # each was refused by the layer it sizes, unnamed yet: "FullyConnected: in_features=128,
    # out_features=0", not hidden=0; or with image_shape's 8.0 as "in_features=256.0"
    # hidden and num_classes are one size each: hidden=(128, 64), taken for a tuple of sizes as
    # channels is, passed and was refused by fc1, unnamed
    sizes = {"image_shape": image_shape, "channels": channels}
    for name, given in (sizes | {"hidden": (hidden,), "num_classes": (num_classes,)}).items():
        if not all(is_int(v) and v >= 1 for v in given):
            shown = given if name in sizes else given[0]
            raise NetworkError(f"LeNet: {name}={shown!r}: sizes are ints >= 1")
    c, h, w = image_shape
    net = Network()
    size: tuple[int, ...] = (h, w)
    prev, in_ch = IMAGE, c
    for i, out_ch in enumerate(channels, start=1):
        conv = net.add(f"conv{i}", Conv2D(in_ch, out_ch, 3, padding=1, act="relu"), prev)
        pool = net.add(f"pool{i}", MaxPool2D(2), f"conv{i}")
        size = pool.geom.out_size(conv.out_size(size))
        if min(size) < 1:  # a NetworkError: distconv train says it on one line
            raise NetworkError(
                f"LeNet: image_shape {image_shape} is too small for {i} pooling stages "
                f"(each halves the image: {len(channels)} need at least "
                f"{2 ** len(channels)}x{2 ** len(channels)})"
            )
        prev, in_ch = f"pool{i}", out_ch
    net.add("fc1", FullyConnected(in_ch * size[0] * size[1], hidden, act="relu"), prev)
    net.add("fc2", FullyConnected(hidden, num_classes), "fc1")
    net.add("loss", SoftmaxCrossEntropy(), ["fc2", LABEL])
    return net


def _sizes(name: str, given: Any) -> tuple[Any, ...]:
    """``given``, a sequence of sizes, as a tuple; a NetworkError naming ``name`` where it is
    none (an int, a str: "32,64" was read as the sizes '3', '2', ',' ...; a set, whose order is
    not the stages', a mapping, whose keys were read, a 0-d array, which cannot be iterated)."""
    not_sizes = isinstance(given, (str, bytes, Set, Mapping)) or getattr(given, "ndim", 1) == 0
    if not_sizes or not isinstance(given, Iterable):
        raise NetworkError(f"LeNet: {name}={given!r}: a sequence of sizes (ints >= 1) is needed")
    return tuple(given)
