"""SelectiveFullyConnected's pad_value that float() cannot hold (review k255)."""

import pytest

from distconv.layers import LayerError, SelectiveFullyConnected


@pytest.mark.parametrize("pad", [-(10**400), 10**400])
def test_a_pad_value_too_large_for_a_float_is_refused_naming_the_layer(pad):
    # float() raised a bare OverflowError ("int too large to convert to float") from inside
    # the layer's constructor, naming neither the layer nor pad_value
    with pytest.raises(LayerError, match=r"SelectiveFullyConnected: pad_value must be a number"):
        SelectiveFullyConnected(3, 6, inference=True, pad_value=pad)
