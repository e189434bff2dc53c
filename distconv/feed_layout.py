"""Whether a data set's images hold the channels the convolution that reads them was built for,
said in the data's words. The layer's own refusal, ``Conv2D 'conv1': expected 1 input channels,
got 8 (input shape (64, 8, 8, 1))``, blames the layer at the first step, and says nothing of
images laid out channels last (``(N, H, W, C)``), the usual layout outside this framework.
:func:`~distconv.data_checks.check_sets` asks this before training, of both sets.
"""

from __future__ import annotations

from typing import Any

from distconv.data import DataError
from distconv.layers.conv import ConvNd
from distconv.network import Network
from distconv.sequence_set import SequenceSet, arrays_of

#: the spatial axes of one example, as a shape names them, by the convolution's dimensions
SPATIAL_AXES = {1: ("L",), 2: ("H", "W"), 3: ("D", "H", "W")}


def refuse_other_channels(network: Network, what: str, data: Any) -> None:
    """Refuse a float feed of ``data`` (arrays by feed name; None: none) whose examples hold
    another number of channels on axis 1 than a convolution that reads the feed was built for
    (its ``in_channels``). An example of another number of axes is left to the layer, whose
    refusal hints at the reshape. A sequence set's rows are no images: it is not read.

    Raises:
        DataError: naming the ``what`` set (``"training"``, ``"test"``), the feed, its example
            shape, the layer and the shape it reads, and the transpose to make where the
            examples hold that many channels on their last axis (channels last).
    """
    if isinstance(data, SequenceSet):
        return
    readers = convolutions_reading(network)
    for feed, values in arrays_of(data).items():  # in order: every rank alike
        if values.dtype.kind in "iub":  # ids: the layers that read them check them
            continue
        for conv in readers.get(feed, ()):
            if values.ndim == 2 + conv.nd and values.shape[1] != conv.in_channels:
                example = tuple(values.shape[1:])
                raise DataError(f"the {what} set's {feed!r} {other_channels(example, conv)}")


def convolutions_reading(network: Network) -> dict[str, list[ConvNd]]:
    """The convolutions of ``network`` that read each of its feeds as it is fed, in the order
    added. A name a layer gives is no feed, though a data set holds an array of that name: the
    layer's output is read, and the array is not fed."""
    readers: dict[str, list[ConvNd]] = {}
    for name, inputs in network.wiring.items():
        layer = network.layers.get(name)
        if isinstance(layer, ConvNd):
            for feed in inputs:
                if feed not in network.layers:
                    readers.setdefault(feed, []).append(layer)
    return readers


def other_channels(example: tuple[int, ...], conv: ConvNd) -> str:
    """What a feed of examples of shape ``example`` is told (after its name) where ``conv``
    reads them and was built for other channels: both shapes, and the way out."""
    channels = conv.in_channels
    size = conv.input_size or SPATIAL_AXES.get(conv.nd, ("...",))
    built = f"({', '.join(map(str, (channels, *size)))})"
    said = (
        f"holds examples of shape {example}, {example[0]} channel(s) on axis 1, but "
        f"{conv.label}, which reads it, was built for {channels} channel(s) first, examples "
        f"of shape {built}"
    )
    if example[-1] == channels:
        last = conv.nd + 1
        order = ", ".join(map(str, (0, last, *range(1, last))))
        return (
            f"{said}: the images are channels last, it seems (their last axis holds "
            f"{channels}); transpose them to channels first, x.transpose({order})"
        )
    return f"{said}: give the images {channels} channel(s), or build the model for {example[0]}"
