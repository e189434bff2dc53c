"""A filter bank per sample: against one convolution per sample and against PyTorch."""

import numpy as np
import pytest

from distconv.kernels import conv_per_sample
from distconv.kernels.conv import conv_backward, conv_forward, flip_pays
from distconv.kernels.conv_per_sample import per_sample_conv_backward, per_sample_conv_forward
from distconv.kernels.shape import ConvGeometry

# (nd, C, O, size, kernel, stride, padding, dilation, groups)
CASES = [
    (2, 4, 3, 6, 3, 1, 1, 1, 1),  # same-padded: the input gradient goes by the flipped filters
    (2, 2, 6, 5, 3, 1, 0, 1, 1),  # few channels fan out: col2im
    (2, 4, 6, 7, 3, 2, 1, 1, 2),  # strided and grouped: col2im
    (2, 4, 4, 7, 3, 1, 2, 2, 2),  # dilated and grouped, flipped
    (2, 3, 2, 6, 2, 3, 0, 1, 1),  # stride wider than the kernel: pixels no tap reaches
    (3, 2, 3, 4, 3, 1, 1, 1, 1),  # a volume
    (1, 3, 2, 9, 3, 2, 1, 1, 1),  # a sequence
    (3, 3, 3, 4, 3, 1, 1, 1, 1),  # a volume, flipped
    (1, 4, 2, 9, 3, 1, 2, 2, 2),  # a dilated grouped sequence, flipped
    (2, 4, 4, 7, 2, 1, 1, 1, 2),  # an even kernel, one-sided reach, flipped
    (2, 4, 1, 6, 3, 1, 0, 1, 1),  # no padding: the adjoint pads two a side, flipped
    (2, 12, 3, 6, 3, 1, 1, 1, 1),  # flipped, x^T copied contiguous for the filter gradient
    (3, 24, 4, 4, 3, 1, 1, 1, 2),  # the same grouped, in a volume
    (2, 12, 4, 6, 3, 1, 1, 1, 2),  # 12 channels, 6 a group: the view, as for fewer
]


def _arrays(rng, case, n=5, dtype=np.float64):
    nd, c, o, size, k, s, p, d, g = case
    geom = ConvGeometry.make(nd, k, s, p, d, g)
    x = rng.standard_normal((n, c) + (size,) * nd).astype(dtype)
    w = rng.standard_normal((n, o, c // g) + (k,) * nd).astype(dtype)
    dy = rng.standard_normal((n, o, *geom.out_size(x.shape[2:]))).astype(dtype)
    return geom, x, w, dy


@pytest.mark.parametrize("case", CASES)
def test_matches_one_convolution_per_sample(rng, case):
    geom, x, w, dy = _arrays(rng, case)
    y = per_sample_conv_forward(x, w, geom)
    dx, dw = per_sample_conv_backward(dy, x, w, geom)
    for i in range(x.shape[0]):
        xi, wi, dyi = x[i : i + 1], w[i], dy[i : i + 1]
        np.testing.assert_allclose(y[i], conv_forward(xi, wi, geom)[0][0], rtol=1e-12)
        dxi, dwi = conv_backward(dyi, xi, wi, geom)
        np.testing.assert_allclose(dx[i], dxi[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(dw[i], dwi, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case, flips", [(CASES[0], True), (CASES[1], False), (CASES[2], False)])
def test_input_gradient_goes_by_flipped_filters_exactly_when_it_pays(rng, monkeypatch, case, flips):
    geom, x, w, dy = _arrays(rng, case)
    assert flip_pays(dy.shape, x.shape, geom) == flips
    calls = []
    real = conv_per_sample.flip_weight
    monkeypatch.setattr(conv_per_sample, "flip_weight", lambda *a: calls.append(1) or real(*a))
    dx, _ = per_sample_conv_backward(dy, x, w, geom, need_dw=False)
    assert bool(calls) == flips
    for i in range(x.shape[0]):  # and either route gives the right numbers
        ref = conv_backward(dy[i : i + 1], x[i : i + 1], w[i], geom, need_dw=False)[0]
        np.testing.assert_allclose(dx[i], ref[0], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_both_gradients_come_from_one_set_of_columns_when_flipped(rng, monkeypatch, case):
    """Where the input gradient goes by flipped filters, the filter gradient reuses its columns
    (of ``dy``, for the adjoint) instead of building columns of ``x``: one build per chunk,
    and the same gradients as each computed on its own."""
    geom, x, w, dy = _arrays(rng, case, n=6)
    with monkeypatch.context() as m:  # the references: each gradient its own way (col2im)
        m.setattr(conv_per_sample, "flip_pays", lambda *a: False)
        want = per_sample_conv_backward(dy, x, w, geom)
    monkeypatch.setattr("distconv.kernels.parallel.CHUNK_WORK", 1)  # a chunk per sample
    built = []
    real = conv_per_sample.grouped_columns
    monkeypatch.setattr(
        conv_per_sample, "grouped_columns", lambda v, *a, **k: built.append(v) or real(v, *a, **k)
    )
    dx, dw = per_sample_conv_backward(dy, x, w, geom)
    flips = flip_pays(dy.shape, x.shape, geom)
    # flipped: columns of dy only; else those of x for the filters, none for col2im
    assert all(v is (dy if flips else x) for v in built) and len(built) == x.shape[0]
    np.testing.assert_allclose(dx, want[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, want[1], rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("what", ["inf in dy", "nan in dy", "inf in x"])
@pytest.mark.parametrize("case", [c for c in CASES if c[5] == 1])  # stride 1: wide columns
def test_a_non_finite_value_makes_nan_exactly_where_the_definition_does(
    rng, routes_non_finite_like_the_definition, case, what
):
    """Wide columns hold junk (image or dy values past a row's end) times the zeros the other
    side was widened with: an inf or NaN there must not become NaN in taps the definition's
    sum never reaches. The value at each position of one plane in turn, both routes (the
    adjoint's columns of dy, and columns of x)."""
    geom, x, w, dy = _arrays(rng, case, n=2)

    def weight_grad(xs, dys):
        return per_sample_conv_backward(dys, xs, w, geom)[1]

    routes_non_finite_like_the_definition(x, dy, geom, what, weight_grad, shared=False)


@pytest.mark.parametrize("case", CASES)
def test_against_pytorch_grouped_convolution(rng, torch, case):
    # PyTorch's form of the same thing: the batch as channels of one image, N*G groups
    nd, c, o, size, k, s, p, d, g = case
    geom, x, w, dy = _arrays(rng, case)
    n = x.shape[0]
    conv = getattr(torch.nn.functional, f"conv{nd}d")
    tx = torch.tensor(x.reshape(1, n * c, *x.shape[2:]), requires_grad=True)
    tw = torch.tensor(w.reshape(n * o, c // g, *w.shape[3:]), requires_grad=True)
    ty = conv(tx, tw, None, s, p, d, n * g)
    ty.backward(torch.tensor(dy.reshape(ty.shape)))
    y = per_sample_conv_forward(x, w, geom)
    dx, dw = per_sample_conv_backward(dy, x, w, geom)
    np.testing.assert_allclose(y.reshape(ty.shape), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dx.reshape(tx.shape), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dw.reshape(tw.shape), tw.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_only_the_asked_gradients(rng):
    geom, x, w, dy = _arrays(rng, CASES[0])
    dx, dw = per_sample_conv_backward(dy, x, w, geom, need_dx=False)
    assert dx is None and dw.shape == w.shape
    dx, dw = per_sample_conv_backward(dy, x, w, geom, need_dw=False)
    assert dw is None and dx.shape == x.shape


def test_an_empty_batch(rng):
    geom, x, w, dy = _arrays(rng, CASES[2], n=0)
    assert per_sample_conv_forward(x, w, geom).shape == dy.shape
    dx, dw = per_sample_conv_backward(dy, x, w, geom)
    assert dx.shape == x.shape and dw.shape == w.shape


@pytest.mark.parametrize("case", CASES)
def test_chunks_split_the_batch_without_changing_a_bit(rng, monkeypatch, case):
    geom, x, w, dy = _arrays(rng, case, n=7, dtype=np.float32)
    whole = per_sample_conv_forward(x, w, geom), *per_sample_conv_backward(dy, x, w, geom)
    monkeypatch.setattr("distconv.kernels.parallel.CHUNK_WORK", 1)  # a chunk per sample
    monkeypatch.setattr("distconv.kernels.parallel.MIN_WORK_PER_THREAD", 1)
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "3")
    chunked = per_sample_conv_forward(x, w, geom), *per_sample_conv_backward(dy, x, w, geom)
    for a, b in zip(whole, chunked):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "w_shape, match",
    [
        ((4, 6, 2, 3, 3), "do not fit images"),  # a filter bank for another batch size
        ((5, 6, 3, 3, 3), "do not fit images"),  # C/G wrong
        ((5, 6, 2, 3), "do not fit images"),  # not a 2-D kernel
        ((5, 5, 2, 3, 3), "do not split into 2 groups"),
        ((5, 6, 2, 9, 1), "do not fit images"),  # the right volume, the wrong kernel
    ],
)
def test_filters_that_do_not_fit_are_refused(rng, w_shape, match):
    geom, x, _, _ = _arrays(rng, CASES[2])
    with pytest.raises(ValueError, match=match):
        per_sample_conv_forward(x, np.zeros(w_shape), geom)


def test_images_and_output_gradients_that_do_not_fit_are_refused(rng):
    geom, x, w, dy = _arrays(rng, CASES[0])
    with pytest.raises(ValueError, match=r"expected 4-D images"):
        per_sample_conv_forward(x[0], w, geom)
    with pytest.raises(ValueError, match=r"output gradient \(5, 3, 5, 5\) should be"):
        per_sample_conv_backward(dy[:, :, :5, :5], x, w, geom)


@pytest.mark.parametrize("case", [CASES[0], CASES[3], *CASES[-3:]])
def test_the_flipped_filter_gradient_copies_x_transposed_from_enough_channels(
    rng, monkeypatch, case
):
    """From :data:`~conv_per_sample.CONTIGUOUS_X_MIN_CHANNELS` channels per group on, ``x^T``
    is copied contiguous for the product; either way the gradient is the one computed on its
    own through the columns of ``x``."""
    geom, x, w, dy = _arrays(rng, case)
    assert flip_pays(dy.shape, x.shape, geom)
    with monkeypatch.context() as m:
        m.setattr(conv_per_sample, "flip_pays", lambda *a: False)
        want = per_sample_conv_backward(dy, x, w, geom, need_dx=False)[1]
    copies = []
    real = conv_per_sample.widen_output_channels_last
    monkeypatch.setattr(
        conv_per_sample,
        "widen_output_channels_last",
        lambda *a: copies.append(1) or real(*a),
    )
    dw = per_sample_conv_backward(dy, x, w, geom)[1]
    channels = x.shape[1] // geom.groups
    assert bool(copies) == (channels >= conv_per_sample.CONTIGUOUS_X_MIN_CHANNELS)
    np.testing.assert_allclose(dw, want, rtol=1e-10, atol=1e-12)
