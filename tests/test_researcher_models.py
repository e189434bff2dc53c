"""The shipped models as a researcher sizes them (:mod:`distconv.models`)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distconv.models import lenet
from distconv.network import NetworkError


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"hidden": 0}, "hidden=0"),
        ({"num_classes": 0}, "num_classes=0"),
        ({"channels": (8, 0)}, "channels=(8, 0)"),
        ({"image_shape": (1, 8.0, 8)}, "image_shape=(1, 8.0, 8)"),
        ({"hidden": True}, "hidden=True"),
        ({"hidden": (128, 64)}, "hidden=(128, 64)"),
        ({"num_classes": (10,)}, "num_classes=(10,)"),
    ],
)
def test_lenet_names_the_argument_that_is_no_size(kwargs, named):
    """Each was refused by the layer it sizes, which has no name yet: hidden=0 as
    "FullyConnected: in_features=256, out_features=0", an 8.0 as "in_features=256.0"."""
    with pytest.raises(NetworkError, match=re.escape(f"LeNet: {named}: sizes are ints >= 1")):
        lenet(**kwargs)


def test_lenet_takes_one_stage_per_channel_count():
    """The docstring said "the two convolutions"; any number of stages is built."""
    net = lenet((1, 8, 8), channels=(2, 3, 4), hidden=8)
    assert [n for n in net.layers if n.startswith("conv")] == ["conv1", "conv2", "conv3"]


def test_lenet_builds_a_stage_per_channel_count_an_iterator_gives():
    """channels=map(int, "2,3".split(",")), as a command line's value is read: the size check
    used the iterator up, and a network without a convolution was built, without a word."""
    net = lenet((1, 8, 8), channels=map(int, "2,3".split(",")), hidden=8)
    assert [n for n in net.layers if n.startswith("conv")] == ["conv1", "conv2"]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"channels": 32}, "channels=32"),  # one stage's count: "'int' object is not iterable"
        ({"channels": "32,64"}, "channels='32,64'"),  # was read as '3', '2', ',' ...
        ({"image_shape": 8}, "image_shape=8"),  # "object of type 'int' has no len()"
        ({"channels": np.array(32)}, "channels=array(32)"),  # "iteration over a 0-d array"
        ({"channels": {32}}, "channels={32}"),  # a set's order is its hashes', not the stages'
        ({"image_shape": {"c": 1}}, "image_shape={'c': 1}"),  # its keys were read as sizes
    ],
)
def test_lenet_names_the_argument_that_is_no_sequence_of_sizes(kwargs, named):
    """A bare TypeError from tuple() or len() named no argument of lenet's."""
    with pytest.raises(NetworkError, match=re.escape(f"LeNet: {named}: a sequence of sizes")):
        lenet(**kwargs)


def test_lenet_takes_an_image_shape_an_iterator_gives():
    """image_shape=map(int, "1,8,8".split(",")), as a command line's value is read, failed
    "object of type 'map' has no len()", as channels given so once built no stage."""
    net = lenet(map(int, "1,8,8".split(",")), channels=(2,), hidden=8)
    assert [n for n in net.layers if n.startswith("conv")] == ["conv1"]
