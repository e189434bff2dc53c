"""ConvSpec: the one place convolutions check channels, groups and sizes."""

import re

import numpy as np
import pytest

from distconv.kernels.conv import (
    conv_any_backward,
    conv_backward,
    conv_backward_data,
    conv_forward,
)
from distconv.kernels.shape import ConvGeometry, ConvSpec


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


def _conv_calls():
    g, x, w = ConvGeometry.make(2, 3, 1, 1), np.ones((2, 3, 5, 5)), np.ones((4, 3, 3, 3))
    short = np.ones((2, 4, 4, 4))  # the output is 5x5
    return [
        (lambda: conv_forward(x, np.ones((4, 2, 3, 3)), g), r"filters \(4, 2, 3, 3\) do not fit"),
        (lambda: conv_forward(x, np.ones((4, 3, 2, 2)), g), "do not fit images"),
        (lambda: conv_forward(x[0], w, g), r"expected 4-D images .* got \(3, 5, 5\)"),
        (lambda: conv_forward(x[..., :1, :1], w, ConvGeometry.make(2, 3)), "larger than the"),
        (lambda: conv_forward(x, w, g, dw_from=short), r"gradient \(2, 4, 4, 4\) should be"),
        # these computed a gradient from the wrong-sized dy, with no error at all
        (lambda: conv_backward(short, x, w, g), r"gradient \(2, 4, 4, 4\) should be"),
        (lambda: conv_backward(short, x, w, g, need_dw=False), "should be"),
        (lambda: conv_backward_data(short, w, g, x.shape), "should be"),
        (lambda: conv_any_backward(short, x, w, g, False, True, False), "should be"),
    ]


@pytest.mark.parametrize("call, match", _conv_calls())
def test_the_conv_kernels_refuse_arrays_that_do_not_fit(call, match):
    """A kernel raises ValueError for bad shapes (docs/architecture.md, Kernels): conv_forward
    failed in matmul's message or with 'negative dimensions are not allowed', and
    conv_backward and conv_backward_data took an output gradient of the wrong size and
    returned gradients computed from it."""
    with pytest.raises(ValueError, match=match):
        call()


def test_the_adjoint_takes_the_short_input_of_a_transposed_convolution():
    """Dilation 2 at stride 1 allows output_padding 1, which leaves a transposed convolution's
    input one row short of the convolution's output: the check must let that through."""
    spec = ConvSpec.make((2, 3, 3, 1, 0, 2, 1), transposed=True, output_padding=1)
    out = spec.out_size((4, 4))
    assert spec.geom.out_size(out) == (5, 5)  # the convolution's output: one more than 4
    g = np.ones((1, 2, 4, 4))
    y = conv_backward_data(g, np.ones((2, 3, 3, 3)), spec.geom, (1, 3, *out))
    assert y.shape == (1, 3, *out)
    with pytest.raises(ValueError, match="should be"):  # two rows short is no output padding
        conv_backward_data(g[..., :3, :3], np.ones((2, 3, 3, 3)), spec.geom, (1, 3, *out))


def test_a_transposed_backward_refuses_an_output_gradient_no_output_padding_makes():
    """conv_any_backward checked only a convolution's dy: a transposed convolution's (7x7
    here, 8x8 with output_padding 1) of 9x9 was cut to its input's reach and its gradients
    computed, with no error, and a short one was named as if x were the output gradient."""
    spec = ConvSpec.make((4, 6, 3, 2, 1, 1, 1), transposed=True)
    x, w = np.ones((2, 4, 4, 4)), np.ones((4, 6, 3, 3))
    for side in (7, 8):  # output_padding 0 and 1: both are this layer's output sizes
        dx, dw = conv_any_backward(np.ones((2, 6, side, side)), x, w, spec.geom, True, True, True)
        assert dx.shape == x.shape and dw.shape == w.shape
    for side in (9, 6):
        with pytest.raises(
            ValueError, match=rf"gradient \(2, 6, {side}, {side}\) should be \(2, 6, 7, 7\) plus"
        ):
            conv_any_backward(np.ones((2, 6, side, side)), x, w, spec.geom, True, True, True)
    with pytest.raises(
        ValueError, match=r"input \(2, 4, 4, 4\) does not fit output gradient \(3, "
    ):
        conv_any_backward(np.ones((3, 6, 7, 7)), x, w, spec.geom, True, True, True)


@pytest.mark.parametrize(
    "shape, then",
    [
        ((2, 5, 7, 7), r"filters \(4, 6, 3, 3\) do not fit images \(2, 5, 7, 7\)"),
        ((2, 6, 7), r"expected 4-D images"),
        ((2, 6, 7, 7, 1), r"expected 4-D images"),
    ],
)
def test_a_transposed_backward_names_an_output_gradient_of_the_wrong_channels_or_axes(shape, then):
    """Its filter and axis checks read dy as the adjoint's images: an output gradient of 5
    channels for 6, or of 3 axes for 4, was named "images", never the output gradient."""
    spec = ConvSpec.make((4, 6, 3, 2, 1, 1, 1), transposed=True)
    x, w = np.ones((2, 4, 4, 4)), np.ones((4, 6, 3, 3))
    with pytest.raises(ValueError, match=rf"^output gradient {re.escape(str(shape))}: {then}"):
        conv_any_backward(np.ones(shape), x, w, spec.geom, True, True, True)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("w_shape", [(4, 6, 2, 2), (4, 6, 3)])
def test_a_transposed_backward_names_filters_of_the_wrong_kernel_not_the_output_gradient(w_shape):
    """A filter bank of another kernel size or rank was named as the output gradient's fault
    ("output gradient (2, 6, 7, 7): filters ... do not fit images"), though that dy fits:
    the filters are checked alone first, and named."""
    spec = ConvSpec.make((4, 6, 3, 2, 1, 1, 1), transposed=True)
    x, dy = np.ones((2, 4, 4, 4)), np.ones((2, 6, 7, 7))
    with pytest.raises(ValueError, match=rf"^filters {re.escape(str(w_shape))} should be \(C_in, "):
        conv_any_backward(dy, x, np.ones(w_shape), spec.geom, True, True, True)
    conv_any_backward(dy, x, np.ones((4, 6, 3, 3)), spec.geom, True, True, True)  # it fits
