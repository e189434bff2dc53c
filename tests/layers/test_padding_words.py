"""A padding of two values per axis, taken for per-side padding (before and after, as
PyTorch's F.pad), was refused as "padding needs 2 values (one per spatial axis)", which did not
say that per-side padding is not supported or what to do instead."""

import pytest

from distconv.layers import Conv2D, Conv3D, ConvTranspose2D, MaxPool2D
from distconv.layers.errors import LayerError

PER_SIDE = (
    "per-side padding is not supported: pad the input yourself (np.pad on the arrays you feed) "
    "and give padding 0"
)


@pytest.mark.parametrize(
    "make, words",
    [
        (
            lambda: Conv2D(2, 2, 3, padding=(0, 1, 1, 2)),
            "Conv2D: padding needs 2 values (one per spatial axis, for both its sides), "
            "got (0, 1, 1, 2)",
        ),
        (
            lambda: ConvTranspose2D(2, 2, 3, padding=(1, 1, 0, 0)),
            "ConvTranspose2D: padding needs 2 values (one per spatial axis, for both its "
            "sides), got (1, 1, 0, 0)",
        ),
        (
            lambda: MaxPool2D(2, padding=(0, 1, 1, 0)),
            "MaxPool2D: padding needs 2 values (one per spatial axis, for both its sides), "
            "got (0, 1, 1, 0)",
        ),
        (
            lambda: Conv3D(1, 1, 3, padding=(1, 1, 0, 0, 1, 1)),
            "Conv3D: padding needs 3 values (one per spatial axis, for both its sides), "
            "got (1, 1, 0, 0, 1, 1)",
        ),
    ],
)
def test_per_side_padding_is_refused_saying_it_is_not_supported_and_the_way_out(make, words):
    with pytest.raises(LayerError) as refused:
        make()
    assert str(refused.value) == f"{words}: {PER_SIDE}"


def test_another_wrong_count_is_not_told_of_per_side_padding():
    with pytest.raises(LayerError) as refused:
        Conv2D(2, 2, 3, padding=(1, 1, 1))
    assert str(refused.value) == (
        "Conv2D: padding needs 2 values (one per spatial axis, for both its sides), got (1, 1, 1)"
    )
