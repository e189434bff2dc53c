"""Depthwise convolutions (groups == input channels): the strided input gradient by shifted
slices, and the batched layout the cost model gives grouped convolutions on small images."""

import itertools

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.kernels import conv, conv_columns, conv_depthwise, im2col
from distconv.kernels.conv import conv_backward_data
from distconv.kernels.conv_layout import use_batched
from distconv.kernels.shape import ConvGeometry
from distconv.layers import Conv2D, Conv3D, ConvTranspose2D

#: (channels, multiplier, kernel, stride, padding, dilation, spatial size): one filter a
#: channel, the shifted slices' cases
STRIDED = [
    (3, 1, 3, 2, 1, 1, (9, 8)),
    (4, 1, 3, 2, 0, 1, (9, 9)),
    (2, 1, 2, 3, 1, 2, (10, 7)),  # dilated, stride 3
    (5, 1, 5, (2, 1), 2, 1, (8, 8)),  # strided along one axis only
    (3, 1, 3, 2, 1, 1, (7, 6, 5)),  # 3-D
    (2, 1, 1, 2, 0, 1, (7, 6)),  # 1x1: every other pixel gets nothing
    (3, 1, 3, 4, 1, 1, (10, 11)),  # stride past the kernel, trailing rows unread
    (2, 1, 3, 2, 3, 1, (5, 5)),  # padding past the kernel's reach
    (3, 1, (3, 2), (1, 3), (1, 0), (2, 1), (8, 9)),  # strided along the last axis only
    (2, 1, 3, 2, 1, 1, (9,)),  # 1-D
    (2, 1, (3, 1, 2), (2, 1, 3), (1, 0, 1), (1, 2, 1), (5, 4, 7)),  # 3-D, each axis its own
    (2, 1, 5, 3, 2, 1, (13, 4)),  # a kernel wider than the image is long
]
#: a channel multiplier: the columns route's products add over it, faster than a pass each
MULTIPLIED = [
    (4, 2, 3, 2, 0, 1, (9, 9)),  # eight outputs read four inputs
    (2, 3, 2, 3, 1, 2, (10, 7)),
    (3, 2, 3, 2, 1, 1, (7, 6, 5)),
    (2, 4, 5, 3, 2, 1, (13, 4)),
]


def _definition_dx(g, w, geom, x_shape):
    """``dx`` pixel by pixel from the definition, independent of any route's slicing: output
    ``q`` of filter ``o`` reads input ``q * stride - pad + tap * dilation`` of channel
    ``o // m``; a pair off the image is no pair."""
    c = x_shape[1]
    m = w.shape[0] // c
    dx = np.zeros(x_shape)
    for o, tap, q in itertools.product(
        range(w.shape[0]), np.ndindex(*geom.ksize), np.ndindex(*g.shape[2:])
    ):
        at = [
            i * s - p + t * d for i, s, p, t, d in zip(q, geom.stride, geom.pad, tap, geom.dilation)
        ]
        if all(0 <= i < n for i, n in zip(at, x_shape[2:])):
            dx[(slice(None), o // m, *at)] += w[(o, 0, *tap)] * g[(slice(None), o, *q)]
    return dx


def _by_shifted_slices(g, w, geom, x_shape, monkeypatch):
    """:func:`conv_backward_data`, failing unless it went by the shifted slices: a case that
    the route stops taking must not pass by comparing the columns route with itself."""
    calls, real = [], conv_depthwise.depthwise_data_grad
    with monkeypatch.context() as m:
        m.setattr(conv, "depthwise_data_grad", lambda *a: calls.append(a) or real(*a))
        dx = conv_backward_data(g, w, geom, x_shape)
    assert calls, "the strided depthwise input gradient did not go by shifted slices"
    return dx


def _im2col_data_grad(g, w, geom, x_shape, monkeypatch):
    """The same input gradient by the columns route the shifted slices replaced."""
    with monkeypatch.context() as m:
        m.setattr(conv, "depthwise_data_grad_applies", lambda *a: False)
        return conv_backward_data(g, w, geom, x_shape)


def _case(rng, c, mult, k, s, p, d, size, dtype=np.float64):
    geom = ConvGeometry.make(len(size), k, s, p, d, c)
    x_shape = (3, c, *size)
    w = rng.standard_normal((c * mult, 1, *geom.ksize)).astype(dtype)
    g = rng.standard_normal((3, c * mult, *geom.out_size(size))).astype(dtype)
    return geom, x_shape, w, g


@pytest.mark.parametrize("c,mult,k,s,p,d,size", STRIDED)
def test_strided_input_gradient_equals_the_columns_route(
    rng, monkeypatch, c, mult, k, s, p, d, size
):
    geom, x_shape, w, g = _case(rng, c, mult, k, s, p, d, size)
    dx = _by_shifted_slices(g, w, geom, x_shape, monkeypatch)
    assert dx.shape == x_shape and dx.dtype == g.dtype
    np.testing.assert_allclose(dx, _definition_dx(g, w, geom, x_shape), atol=1e-12)
    np.testing.assert_allclose(dx, _im2col_data_grad(g, w, geom, x_shape, monkeypatch), atol=1e-12)


@pytest.mark.parametrize("c,mult,k,s,p,d,size", MULTIPLIED)
def test_a_channel_multiplier_stays_on_columns(rng, monkeypatch, c, mult, k, s, p, d, size):
    """With ``m`` filters a channel the columns' ``(K, m) @ (m, L)`` products beat ``m``
    passes a tap (2.3-4.7x the time by slices at stride 2): the route is not taken."""
    geom, x_shape, w, g = _case(rng, c, mult, k, s, p, d, size)
    assert not conv_depthwise.depthwise_data_grad_applies(c, c * mult, geom)
    calls, real = [], conv_depthwise.depthwise_data_grad
    monkeypatch.setattr(conv, "depthwise_data_grad", lambda *a: calls.append(a) or real(*a))
    dx = conv_backward_data(g, w, geom, x_shape)
    assert not calls
    np.testing.assert_allclose(dx, _definition_dx(g, w, geom, x_shape), atol=1e-12)


def test_strided_input_gradient_builds_no_columns(rng, monkeypatch):
    """The route is taken: neither col2im nor a column matrix is touched."""

    def refuse(*args, **kwargs):
        raise AssertionError("columns built for a strided depthwise input gradient")

    geom, x_shape, w, g = _case(rng, 8, 1, 3, 2, 1, 1, (14, 14))
    expected = _im2col_data_grad(g, w, geom, x_shape, monkeypatch)
    for module, name in [(conv, "col2im_wide"), (conv, "col2im_batched"), (im2col, "col2im")]:
        monkeypatch.setattr(module, name, refuse)
    monkeypatch.setattr(conv_columns, "grouped_columns", refuse)
    np.testing.assert_allclose(conv_backward_data(g, w, geom, x_shape), expected, atol=1e-12)


def test_a_short_adjoint_input_stays_exact(rng, monkeypatch):
    """A transposed convolution's input may be a row shorter than the convolution's output of
    the image it makes (output_padding 2 at stride 2, dilation 3): the windows cover the rows
    it has."""
    geom = ConvGeometry.make(2, 2, 2, 0, 3, 4)
    x_shape, w = (3, 4, 10, 10), rng.standard_normal((4, 1, 2, 2))
    g = rng.standard_normal((3, 4, 3, 3))  # the convolution of 10x10 gives 4x4
    assert geom.out_size(x_shape[2:]) == (4, 4)
    dx = _by_shifted_slices(g, w, geom, x_shape, monkeypatch)
    np.testing.assert_allclose(dx, _definition_dx(g, w, geom, x_shape), atol=1e-12)
    np.testing.assert_allclose(dx, _im2col_data_grad(g, w, geom, x_shape, monkeypatch), atol=1e-12)


def test_non_finite_values_meet_exactly_the_pairs_of_the_definition(rng, monkeypatch):
    """An inf weight or output gradient reaches the pixels it is paired with and no other:
    NaN and inf where the columns route's exact sums have them, nowhere else."""
    geom, x_shape, w, g = _case(rng, 3, 1, 3, 2, 1, 1, (7, 7))
    w[1, 0, 0, 0] = np.inf
    g[0, 2, 1, 1] = -np.inf
    dx = _by_shifted_slices(g, w, geom, x_shape, monkeypatch)
    for expected in (
        _definition_dx(g, w, geom, x_shape),
        _im2col_data_grad(g, w, geom, x_shape, monkeypatch),
    ):
        np.testing.assert_array_equal(np.isfinite(dx), np.isfinite(expected))
        np.testing.assert_allclose(dx, expected, atol=1e-12)  # infs of one sign, NaNs alike
    assert 0 < np.isfinite(dx).sum() < dx.size  # some reached, not all


def test_16_bit_gradients_are_summed_in_float32(rng, monkeypatch):
    geom, x_shape, w, g = _case(rng, 4, 1, 3, 2, 1, 1, (9, 9), dtype=np.float16)
    dx = _by_shifted_slices(g, w, geom, x_shape, monkeypatch)
    exact = conv_backward_data(g.astype(np.float64), w.astype(np.float64), geom, x_shape)
    assert dx.dtype == np.float16
    np.testing.assert_allclose(dx.astype(np.float64), exact, rtol=2e-3, atol=2e-3)


F64 = np.float64


@pytest.mark.parametrize(
    "make,channels,size",
    [
        (lambda: Conv2D(4, 4, 3, stride=2, padding=1, groups=4, dtype=F64), 4, (9, 8)),
        (lambda: Conv2D(3, 6, 3, stride=2, dilation=2, groups=3, dtype=F64), 3, (11, 9)),
        (lambda: Conv2D(4, 8, 3, padding=1, groups=4, dtype=F64), 4, (6, 6)),
        (lambda: Conv3D(2, 4, 3, stride=2, padding=1, groups=2, dtype=F64), 2, (5, 6, 5)),
        (lambda: ConvTranspose2D(3, 3, 3, stride=2, padding=1, groups=3, dtype=F64), 3, (4, 5)),
    ],
    ids=["stride2", "dilated-multiplier2", "stride1-multiplier2", "3d", "transposed"],
)
def test_depthwise_layers_match_finite_differences(rng, make, channels, size):
    layer = make()
    x = Arg(rng.standard_normal((2, channels, *size)))
    report = check_layer_grad(layer, [x])
    assert report.worst < 1e-6
    assert set(report.diffs) >= {"input 0", f"param {layer.name}.weight"}


def test_grouped_convolutions_on_small_images_run_batched():
    """Per sample, a depthwise chunk runs a product per group and sample, each a few thousand
    multiply-adds: up to 14x14 outputs they go batched, from 20x20 (as dense ones) per sample;
    grouped layers of fewer than 9 rows, and 1-D ones, stay per sample, where they ran faster."""
    for direction in ("fwd", "dw", "dx"):
        assert use_batched((14, 14), 9, direction, groups=64)
        assert use_batched((7, 7), 18, direction, groups=32)
        assert not use_batched((20, 20), 9, direction, groups=128)
        assert not use_batched((14, 14), 9, direction)  # one group: LeNet's first layer
        assert use_batched((7, 7), 16, direction, groups=4)  # 1x1, 16 channels a group
        # measured slower batched: few rows a group, and 1-D layers whatever their rows
        assert not use_batched((14, 14), 8, direction, groups=8)  # 1x1, 8 channels a group
        assert not use_batched((14, 14), 4, direction, groups=64)  # 2x2 depthwise
        assert not use_batched((128,), 3, direction, groups=64)  # 1-D depthwise k3
        assert not use_batched((128,), 12, direction, groups=16)


def test_a_batched_depthwise_layer_equals_per_sample(rng, force_layout):
    x = rng.standard_normal((5, 6, 7, 7))
    dy = rng.standard_normal((5, 12, 7, 7))
    geom = ConvGeometry.make(2, 3, 1, 1, 1, 6)
    w = rng.standard_normal((12, 1, 3, 3))
    results = []
    for batched in (True, False):
        force_layout(batched)
        y, dw = conv.conv_forward(x, w, geom, dw_from=dy)
        results.append((y, dw, conv_backward_data(dy, w, geom, x.shape)))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_the_shifted_slices_on_cupy_give_what_numpy_gives(rng, monkeypatch, cupy, dtype):
    """One code path: the same calls on cupy arrays (im2col's device kernels, not cuDNN)."""
    monkeypatch.setenv("DISTCONV_CUDNN", "0")
    for case in (STRIDED[2], STRIDED[4], STRIDED[6]):  # dilated, 3-D, a stride past the kernel
        geom, x_shape, w, g = _case(rng, *case, dtype=dtype)
        want = conv_backward_data(g, w, geom, x_shape)
        got = _by_shifted_slices(cupy.asarray(g), cupy.asarray(w), geom, x_shape, monkeypatch)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(cupy.asnumpy(got), want, rtol=1e-3, atol=1e-3)
