"""SelectiveFullyConnected's pad_value checked when the layer is built: a number pads uneven
selections; what is no number, or a number float() cannot hold, is refused naming the layer."""

import numpy as np
import pytest

from distconv import Arg
from distconv.layers import LayerError, SelectiveFullyConnected


def _uneven(layer):
    x = Arg(np.ones((2, 3), np.float32))
    return layer(x, Arg(ids=np.array([1, 2, 3]), seq_starts=np.array([0, 2, 3]))).value


@pytest.mark.parametrize("pad", [None, "x", [0.0], {}])
def test_a_pad_value_that_is_no_number_is_refused_naming_the_layer(pad):
    # None padded every uneven selection with NaN, silently; "x" failed at the first uneven
    # forward in numpy ("could not convert string to float")
    with pytest.raises(LayerError, match=r"SelectiveFullyConnected: pad_value must be a number"):
        SelectiveFullyConnected(3, 6, inference=True, pad_value=pad)


@pytest.mark.parametrize("pad", [0, -7.5, np.float32(-1e4), float("-inf"), "-inf"])
def test_a_number_pads_uneven_selections(pad):
    layer = SelectiveFullyConnected(3, 6, inference=True, pad_value=pad, bias=False)
    y = _uneven(layer)
    want = layer.weight.value.sum(axis=1)
    np.testing.assert_allclose(y[0], want[[1, 2]], rtol=1e-6)
    assert y[1, 0] == pytest.approx(want[3], rel=1e-6) and y[1, 1] == np.float32(pad)


@pytest.mark.parametrize("pad", [-(10**400), 10**400])
def test_a_pad_value_too_large_for_a_float_is_refused_naming_the_layer(pad):
    # float() raised a bare OverflowError ("int too large to convert to float") from inside
    # the layer's constructor, naming neither the layer nor pad_value
    with pytest.raises(LayerError, match=r"SelectiveFullyConnected: pad_value must be a number"):
        SelectiveFullyConnected(3, 6, inference=True, pad_value=pad)
