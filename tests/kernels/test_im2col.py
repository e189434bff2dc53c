import numpy as np
import pytest

from distconv.kernels.conv import conv_backward, conv_backward_data, conv_forward
from distconv.kernels.im2col import col2im, im2col, im2col_view
from distconv.kernels.shape import (
    ConvGeometry,
    as_tuple,
    conv_output_size,
    conv_transpose_output_size,
)


def test_reference_understand_4d_im2col_fixture():
    # ai-edu's understand_4d_im2col: x = arange(54) as (2,3,3,3), W = arange(24) as (2,3,2,2);
    # its output rows are (sample, y, x) and columns output channels.
    x = np.arange(54.0).reshape(2, 3, 3, 3)
    w = np.arange(24.0).reshape(2, 3, 2, 2)
    y, _ = conv_forward(x, w, ConvGeometry.make(2, 2))
    rows = y.transpose(0, 2, 3, 1).reshape(-1, 2)
    expected = [
        [1035, 2619],
        [1101, 2829],
        [1233, 3249],
        [1299, 3459],
        [2817, 8289],
        [2883, 8499],
        [3015, 8919],
        [3081, 9129],
    ]
    np.testing.assert_array_equal(rows, expected)


def test_reference_im2col_column_layout():
    # the reference implementation's col_x for the same x: the first row is the first 2x2
    # window of every channel
    x = np.arange(54.0).reshape(2, 3, 3, 3)
    col = im2col(x, ConvGeometry.make(2, 2))  # (N, C, kh, kw, oh, ow)
    first_window = col[0, :, :, :, 0, 0].reshape(-1)
    np.testing.assert_array_equal(first_window, [0, 1, 3, 4, 9, 10, 12, 13, 18, 19, 21, 22])


@pytest.mark.parametrize(
    "nd,k,s,p,d",
    [
        (2, 3, 1, 1, 1),
        (2, 3, 2, 0, 1),
        (2, 2, 3, 1, 2),
        (3, 3, 2, 1, 1),
        (3, (1, 2, 3), (2, 1, 1), (0, 1, 1), (1, 2, 1)),
    ],
)
def test_col2im_is_the_adjoint_of_im2col(rng, nd, k, s, p, d):
    geom = ConvGeometry.make(nd, k, s, p, d)
    x = rng.standard_normal((2, 3) + (7,) * nd)
    col = im2col(x, geom)
    c = rng.standard_normal(col.shape)
    lhs = float((col * c).sum())
    rhs = float((x * col2im(c, x.shape, geom)).sum())
    assert lhs == pytest.approx(rhs, rel=1e-12)


def test_output_size_arithmetic():
    assert conv_output_size(56, 3, 1, 1, 1) == 56
    assert conv_output_size(32, 3, 2, 1, 1) == 16
    assert conv_output_size(7, 3, 1, 0, 3) == 1
    assert conv_transpose_output_size(16, 3, 2, 1, 1, 1) == 32
    assert conv_transpose_output_size(conv_output_size(9, 4, 3, 2, 1), 4, 3, 2, 1) == 9
    g = ConvGeometry.make(3, (1, 2, 3), stride=2)
    assert g.out_size((5, 6, 7)) == (3, 3, 3)
    assert g.kernel_volume == 6


def test_geometry_rejects_bad_arguments():
    with pytest.raises(ValueError, match="kernel_size needs 2 values"):
        as_tuple((1, 2, 3), 2, "kernel_size")
    with pytest.raises(ValueError, match="stride must be >= 1"):
        ConvGeometry.make(2, 3, stride=0)
    with pytest.raises(ValueError, match="does not fit"):
        im2col(np.zeros((1, 1, 2, 2)), ConvGeometry.make(2, 3))


@pytest.mark.parametrize(
    "stride,pad,dil,groups", [(1, 1, 1, 1), (1, 2, 2, 2), (2, 1, 1, 2), (1, 0, 1, 4)]
)
def test_stride1_flip_path_equals_col2im_path(rng, monkeypatch, stride, pad, dil, groups):
    # conv_backward_data takes a flipped-kernel convolution at stride 1 where it pays (no more
    # output channels than input ones); both must agree. With 4 channels fanning out to 8 the
    # flip never paid, and the stride-1 cases compared the col2im route with itself.
    from distconv.kernels import conv as conv_module
    from distconv.kernels.conv import grouped_weight

    flipped = []
    real = conv_module._conv_backward_data_by_flip
    monkeypatch.setattr(
        conv_module, "_conv_backward_data_by_flip", lambda *a: flipped.append(1) or real(*a)
    )
    geom = ConvGeometry.make(2, 3, stride, pad, dil, groups)
    x = rng.standard_normal((3, 8, 9, 9))
    w = rng.standard_normal((4, 8 // groups, 3, 3))
    y, _ = conv_forward(x, w, geom)
    dy = rng.standard_normal(y.shape)
    got = conv_backward_data(dy, w, geom, x.shape)
    assert bool(flipped) == (stride == 1)  # the route the name says was taken
    # reference: the adjoint written out with the explicit col2im
    wt = grouped_weight(w, groups).swapaxes(-1, -2)
    col = np.matmul(wt, dy.reshape(3, groups, 4 // groups, -1)).reshape(3, 8, 3, 3, *y.shape[2:])
    np.testing.assert_allclose(got, col2im(col, x.shape, geom), rtol=1e-10, atol=1e-12)


def test_results_are_bitwise_the_same_for_any_thread_count(rng, monkeypatch, pool_use):
    # chunks depend on the shapes alone, so a seeded run reproduces on any number of cores
    geom = ConvGeometry.make(2, 3, 1, 1)
    x = rng.standard_normal((16, 8, 12, 12)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    monkeypatch.setattr("distconv.kernels.parallel.MIN_WORK_PER_THREAD", 1)
    monkeypatch.setattr("distconv.kernels.parallel.CHUNK_WORK", 3000)
    submitted = pool_use
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
        y, _ = conv_forward(x, w, geom)
        results.append((y, *conv_backward(y, x, w, geom)))
        assert bool(submitted) == (threads != "1")  # the chunks really ran on the pool
        submitted.clear()
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_an_empty_batch_gives_empty_results():
    geom = ConvGeometry.make(2, 3, 1, 1)
    x = np.zeros((0, 2, 5, 5))
    w = np.ones((3, 2, 3, 3))
    y, _ = conv_forward(x, w, geom)
    assert y.shape == (0, 3, 5, 5)
    dx, dw = conv_backward(y, x, w, geom)
    assert dx.shape == x.shape and not dw.any()


WIDE_CASES = [
    (2, 3, 1, 1, 1),
    (2, 5, 1, 0, 1),
    (2, 3, 2, 1, 1),
    (2, 3, 3, 2, 2),
    (3, 3, 2, 1, 1),
    (3, (2, 3, 1), (1, 2, 3), (1, 0, 0), (2, 1, 1)),
]


@pytest.mark.parametrize("nd,k,s,p,d", WIDE_CASES)
def test_col2im_wide_equals_col2im(rng, nd, k, s, p, d):
    from distconv.kernels.im2col import col2im_wide, wide_col_size, widen_output

    geom = ConvGeometry.make(nd, k, s, p, d)
    img_shape = (2, 3) + ((11, 10) if nd == 2 else (7, 8, 9))
    out = geom.out_size(img_shape[2:])
    col = rng.standard_normal((2, 3, *geom.ksize, *out))
    wide = wide_col_size(out, img_shape[2:], geom)
    wcol = widen_output(col.reshape(2, -1, *out), wide).reshape(2, 3, *geom.ksize, *wide)
    np.testing.assert_array_equal(col2im_wide(wcol, img_shape, geom), col2im(col, img_shape, geom))


@pytest.mark.parametrize("nd,k,s,p,d", [c for c in WIDE_CASES if c[2] == 1])
def test_wide_im2col_view_holds_the_narrow_columns(rng, nd, k, s, p, d):
    geom = ConvGeometry.make(nd, k, s, p, d)
    x = rng.standard_normal((2, 3) + ((11, 10) if nd == 2 else (7, 8, 9)))
    narrow = im2col(x, geom)
    wide = np.asarray(im2col_view(x, geom, wide=True))
    np.testing.assert_array_equal(wide[..., : narrow.shape[-1]], narrow)


@pytest.mark.parametrize("batch", [2, 0])
@pytest.mark.parametrize("widen", [True, False])
@pytest.mark.parametrize("nd, groups", [(1, 1), (2, 1), (2, 2), (3, 3)])
def test_widen_output_channels_last_is_the_widened_output_transposed(rng, nd, groups, widen, batch):
    from distconv.kernels.im2col import widen_output, widen_output_channels_last

    g = rng.standard_normal((batch, 6) + (4, 5, 3)[:nd])
    size = tuple(s + (2 if widen and i == nd - 1 else 0) for i, s in enumerate(g.shape[2:]))
    got = widen_output_channels_last(g, size, groups)
    n = int(np.prod(size))
    want = widen_output(g, size).reshape(batch, groups, 6 // groups, n).swapaxes(-1, -2)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
