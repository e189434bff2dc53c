"""ConvSpec: the one place convolutions check channels, groups and sizes."""

import pytest

from distconv.kernels.shape import ConvSpec


def test_weight_shapes_fans_and_sizes():
    conv = ConvSpec.make((4, 6, 3, 2, 1, 1, 2), input_size=(5, 6))
    assert conv.weight_shape == (6, 2, 3, 3) and conv.fans == (18, 54)
    assert conv.output_size == (3, 3) and conv.flat_widths() == (4 * 30, 6 * 9)
    deconv = ConvSpec.make((4, 6, 3, 2, 1, 1, 2), nd=3, transposed=True, output_padding=1)
    assert deconv.weight_shape == (4, 3, 3, 3, 3) and deconv.input_size is None
    assert deconv.out_size((2, 3, 4)) == (4, 6, 8)  # (in - 1)s - 2p + (k - 1) + op + 1
    assert "groups=2" in deconv.describe()


@pytest.mark.parametrize(
    "conv,kw,match",
    [
        ((3, 4, 3, 1, 0, 1, 2), {}, "in_channels=3 must be a positive multiple of groups=2"),
        ((2, 0, 3, 1, 0, 1, 1), {}, "out_channels=0 must be a positive"),
        ((1, 1, 5, 1, 0, 1, 1), {"input_size": 3}, r"kernel \(5, 5\).*larger than the input"),
        ((1, 1, 3, 1, 0, 1, 1), {"output_padding": 1}, "only for transposed"),
        ((1, 1, 3, 0, 0, 1, 1), {}, "stride must be >= 1"),
        ((1, 1, (3, 3), 1, 0, 1, 1), {"nd": 3}, "kernel_size needs 3 values"),
    ],
)
def test_bad_arguments_name_the_argument(conv, kw, match):
    with pytest.raises(ValueError, match=match):
        ConvSpec.make(conv, **kw)
