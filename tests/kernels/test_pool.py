"""Pooling kernels against an im2col reference and PyTorch: tiling, general windows, ties."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg
from distconv.kernels import pool
from distconv.kernels.im2col import col2im, im2col_view
from distconv.kernels.pool import (
    avg_pool_backward,
    avg_pool_forward,
    max_pool_backward,
    max_pool_forward,
    tiles_exactly,
)
from distconv.kernels.shape import ConvGeometry
from distconv.layers import MaxPool2D


# -- the im2col reference (the previous implementation: argmax over each window's column) ----
def _windows(x, geom, pad_value):
    view = im2col_view(x, geom, pad_value)
    n, c = view.shape[:2]
    return view.reshape(n, c, geom.kernel_volume, *view.shape[2 + geom.nd :])


def ref_max(x, dy, geom):
    win = _windows(x, geom, -np.inf)
    idx = win.argmax(axis=2)
    y = np.take_along_axis(win, idx[:, :, None], axis=2)[:, :, 0]
    k = np.arange(geom.kernel_volume).reshape((1, 1, -1) + (1,) * geom.nd)
    dcol = (k == idx[:, :, None]) * dy[:, :, None]
    n, c = dy.shape[:2]
    return y, col2im(dcol.reshape(n, c, *geom.ksize, *dy.shape[2:]), x.shape, geom)


def ref_avg(x, dy, geom):
    y = _windows(x, geom, 0.0).mean(axis=2)
    n, c = dy.shape[:2]
    share = np.broadcast_to(
        (dy / geom.kernel_volume)[:, :, None], (n, c, geom.kernel_volume, *dy.shape[2:])
    )
    return y, col2im(share.reshape(n, c, *geom.ksize, *dy.shape[2:]), x.shape, geom)


GEOMETRIES = [
    # (spatial, kernel, stride, pad, dilation)
    ((8, 8), 2, 2, 0, 1),  # tiles exactly, rows of 4: moved by permutation
    ((4, 20), 2, 2, 0, 1),  # tiles exactly, rows of 10: strided copies, the written backward
    ((7, 9), 2, 2, 0, 1),  # kernel = stride, sizes not divisible: a ragged edge
    ((7, 7), 3, 2, 1, 1),  # overlapping, padded
    ((6, 7), (2, 3), (1, 2), (1, 1), 1),
    ((9, 9), 2, 1, 0, 2),  # dilated
    ((4, 5, 6), 2, 2, 1, 1),  # 3-D, padded
    ((4, 4, 4), 2, 2, 0, 1),  # 3-D, tiles exactly
    ((9,), 3, 3, 0, 1),  # 1-D, tiles exactly
    ((6, 9), (2, 3), (2, 3), 0, 1),  # tiles exactly with a different window per axis
]


def _geom(spatial, k, s, p, d):
    return ConvGeometry.make(len(spatial), k, s, p, d)


@pytest.mark.parametrize("spatial,k,s,p,d", GEOMETRIES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_max_pool_matches_reference(rng, spatial, k, s, p, d, accumulate):
    geom = _geom(spatial, k, s, p, d)
    x = rng.standard_normal((2, 3, *spatial)).astype(np.float32)
    y, state = max_pool_forward(x, geom)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    ry, rdx = ref_max(x, dy, geom)
    np.testing.assert_array_equal(y, ry)
    base = rng.standard_normal(x.shape).astype(np.float32) if accumulate else None
    dx = max_pool_backward(dy, state, geom, x.shape, None if base is None else base.copy())
    np.testing.assert_allclose(dx, rdx + (0 if base is None else base), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("spatial,k,s,p,d", GEOMETRIES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_avg_pool_matches_reference(rng, spatial, k, s, p, d, accumulate):
    geom = _geom(spatial, k, s, p, d)
    x = rng.standard_normal((2, 3, *spatial))
    y = avg_pool_forward(x, geom)
    dy = rng.standard_normal(y.shape)
    ry, rdx = ref_avg(x, dy, geom)
    np.testing.assert_allclose(y, ry, rtol=1e-12)
    base = rng.standard_normal(x.shape) if accumulate else None
    dx = avg_pool_backward(dy, geom, x.shape, None if base is None else base.copy())
    np.testing.assert_allclose(dx, rdx + (0 if base is None else base), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("spatial,k,s,p", [((8, 8), 2, 2, 0), ((7, 7), 3, 2, 1)])
def test_max_pool_ties_go_to_the_first_position(spatial, k, s, p):
    """All-zero windows (what a ReLU leaves) send the whole gradient to their first element."""
    geom = _geom(spatial, k, s, p, 1)
    rng = np.random.default_rng(0)
    x = np.maximum(rng.standard_normal((2, 2, *spatial)), 0).round(0).astype(np.float32)
    y, state = max_pool_forward(x, geom)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    _, rdx = ref_max(x, dy, geom)
    np.testing.assert_allclose(max_pool_backward(dy, state, geom, x.shape), rdx, rtol=1e-6)
    # every output gradient lands exactly once: no tie duplicates it
    assert np.isclose(max_pool_backward(dy, state, geom, x.shape).sum(), dy.sum(), rtol=1e-4)


def test_ties_match_torch(torch):
    """PyTorch also routes a tied window's gradient to the first maximum in row-major order."""
    x = np.zeros((1, 2, 6, 6), np.float32)
    x[0, 0, 2, 3] = x[0, 0, 3, 2] = 1.0  # a 2-way tie inside one window
    dy = np.arange(18, dtype=np.float32).reshape(1, 2, 3, 3) + 1
    geom = _geom((6, 6), 2, 2, 0, 1)
    y, state = max_pool_forward(x, geom)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, 2)
    ty.backward(torch.tensor(dy))
    np.testing.assert_array_equal(y, ty.detach().numpy())
    np.testing.assert_array_equal(max_pool_backward(dy, state, geom, x.shape), tx.grad.numpy())


@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (3, 3, 0), (3, 2, 1), (2, 1, 1)])
def test_max_pool_layer_matches_torch_float32(torch, rng, k, s, p):
    x = rng.standard_normal((4, 5, 12, 12)).astype(np.float32)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, k, s, p)
    dy = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.tensor(dy))
    layer, xa = MaxPool2D(k, s, p), Arg(x)
    np.testing.assert_array_equal(layer(xa).value, ty.detach().numpy())
    layer.output.grad = dy
    layer.backward(lambda q: None)
    np.testing.assert_allclose(xa.grad, tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_layer_adds_into_an_existing_gradient(rng):
    x = rng.standard_normal((2, 3, 8, 8))
    layer, xa = MaxPool2D(2), Arg(x)
    layer(xa)
    layer.output.grad = np.ones((2, 3, 4, 4))
    layer.backward(lambda q: None)
    once = xa.grad.copy()
    layer.backward(lambda q: None)
    np.testing.assert_array_equal(xa.grad, 2 * once)


def test_tiles_exactly():
    assert tiles_exactly(_geom((8, 8), 2, 2, 0, 1), (8, 8))
    assert not tiles_exactly(_geom((7, 8), 2, 2, 0, 1), (7, 8))
    assert not tiles_exactly(_geom((8, 8), 2, 1, 0, 1), (8, 8))
    assert not tiles_exactly(_geom((8, 8), 2, 2, 1, 1), (8, 8))


def test_nan_propagates_like_torch():
    x = np.ones((1, 1, 4, 4), np.float32)
    x[0, 0, 1, 1] = np.nan
    y, _ = max_pool_forward(x, _geom((4, 4), 2, 2, 0, 1))
    assert np.isnan(y[0, 0, 0, 0]) and not np.isnan(y[0, 0, 1, 1])


def _torch_max_pool(torch, x, dy, nd, k, s, p, d=1):
    pool = torch.nn.functional.max_pool2d if nd == 2 else torch.nn.functional.max_pool3d
    tx = torch.tensor(x, requires_grad=True)
    ty = pool(tx, k, s, p, d)
    ty.backward(torch.tensor(dy))
    return ty.detach().numpy(), tx.grad.numpy()


def test_nan_windows_route_their_gradient_like_torch(torch):
    # PyTorch keeps taking NaNs: a window's gradient goes to its *last* NaN
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    x[0, 0, 0, 1] = x[0, 0, 1, 0] = np.nan  # two NaNs in the first window
    x[0, 0, 2, 2] = np.nan
    dy = np.arange(1.0, 5.0).reshape(1, 1, 2, 2)
    geom = _geom((4, 4), 2, 2, 0, 1)
    y, state = max_pool_forward(x, geom)
    ty, tdx = _torch_max_pool(torch, x, dy, 2, 2, 2, 0)
    np.testing.assert_array_equal(y, ty)
    dx = max_pool_backward(dy, state, geom, x.shape)
    np.testing.assert_array_equal(dx, tdx)
    assert dx[0, 0, 1, 0] == 1 and dx[0, 0, 0, 1] == 0  # the last NaN, not the first


def test_minus_inf_windows_never_give_their_gradient_to_the_padding(torch):
    # every element -inf: the maximum ties with the -inf padding; PyTorch's gradient goes to the
    # window's first element inside the image, where a plain x == y would lose it in the padding
    x = np.full((1, 1, 4, 4), -np.inf)
    x[0, 0, 3, 3] = 1.0
    geom = _geom((4, 4), 3, 2, 1, 1)
    y, state = max_pool_forward(x, geom)
    dy = np.arange(1.0, 1.0 + y.size).reshape(y.shape)
    ty, tdx = _torch_max_pool(torch, x, dy, 2, 3, 2, 1)
    np.testing.assert_array_equal(y, ty)
    dx = max_pool_backward(dy, state, geom, x.shape)
    np.testing.assert_array_equal(dx, tdx)
    assert dx.sum() == dy.sum()  # nothing lost


@pytest.mark.parametrize(
    "nd,k,s,p,d,size",
    [
        (2, 2, 2, 0, 1, 7),
        (2, 2, 2, 0, 1, 8),  # tiles exactly: the windows moved by permutation
        (2, 2, 2, 0, 1, 20),  # tiles exactly, long rows: strided copies
        (2, 3, 2, 1, 1, 7),
        (2, 2, 1, 1, 1, 7),
        (2, 3, 1, 1, 2, 7),
        (3, 3, 2, 1, 1, 7),
    ],
)
def test_nan_and_minus_inf_sprinkled_match_torch(torch, rng, nd, k, s, p, d, size):
    shape = (3, 2) + (size,) * nd
    x = rng.integers(-3, 4, shape).astype(np.float64)  # small integers: many ties as well
    x[rng.random(shape) < 0.08] = np.nan
    x[rng.random(shape) < 0.3] = -np.inf
    geom = ConvGeometry.make(nd, k, s, p, d)
    y, state = max_pool_forward(x, geom)
    dy = rng.standard_normal(y.shape)
    ty, tdx = _torch_max_pool(torch, x, dy, nd, k, s, p, d)
    np.testing.assert_array_equal(y, ty)
    np.testing.assert_allclose(max_pool_backward(dy, state, geom, x.shape), tdx, rtol=1e-12)


@pytest.mark.parametrize(
    "shape,k,gathers,scatters",
    [
        ((2, 3, 8, 8), 2, True, True),
        ((2, 3, 6, 14), 2, True, True),  # rows of 7
        ((2, 3, 4, 16), 2, False, False),  # rows of 8
        ((2, 3, 6, 6, 6), 3, True, True),  # 3-D, 3x3x3 windows
        ((2, 3, 9), 3, True, True),  # 1-D
        ((64, 32, 4, 4), 2, True, False),  # 256 KiB in float64: gathered, not scattered
        ((130, 32, 8, 8), 2, False, False),  # over the forward's limit of 512 KiB
    ],
)
def test_both_tiling_routes_give_the_same_bits(rng, monkeypatch, shape, k, gathers, scatters):
    """The permutation and the strided copies: the same windows, maxima and gradients, bit
    for bit (signed zeros and NaN payloads too), with ties, NaNs and infinities in ``x`` and
    ``dy``, into a new gradient and added into a given one."""
    geom = ConvGeometry.make(len(shape) - 2, k, k)
    x = rng.integers(-2, 3, shape).astype(np.float64)  # many ties
    monkeypatch.setattr(pool, "keeps_freed_memory", lambda: False)  # glibc's defaults

    def routes():
        return pool._gathers(shape, x, geom), pool._gathers(shape, x, geom, backward=True)

    assert routes() == (gathers, scatters)
    x[rng.random(shape) < 0.05] = np.nan
    x[rng.random(shape) < 0.05] = -np.inf
    x[rng.random(shape) < 0.05] = np.inf
    x[rng.random(shape) < 0.05] = -0.0
    base = rng.standard_normal(shape)

    def run():  # the windows, maxima and both gradients
        y, state = max_pool_forward(x, geom)
        dy = np.random.default_rng(1).standard_normal(y.shape)
        dy.flat[::7], dy.flat[3::11], dy.flat[5::13] = np.inf, np.nan, -0.0
        return (
            y,
            state.windows,
            max_pool_backward(dy, state, geom, shape),
            max_pool_backward(dy, state, geom, shape, base.copy()),
        )

    # every pair of routes there is: (forward, backward) strided/strided, permuted/strided,
    # permuted/permuted (the backward permutes only where the forward may)
    results = []
    for gather, scatter in ((False, False), (True, False), (True, True)):
        monkeypatch.setattr(pool, "GATHER_ROWS_UNDER", 1 << 30 if gather else 0)
        monkeypatch.setattr(pool, "GATHER_MAX_BYTES", 1 << 40)
        monkeypatch.setattr(pool, "keeps_freed_memory", lambda scatter=scatter: scatter)
        monkeypatch.setattr(pool, "SCATTER_MAX_BYTES", 0)
        assert routes() == (gather, scatter)
        results.append(run())
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a.view(np.uint64), b.view(np.uint64))


@pytest.mark.parametrize(
    "spatial,k,s,p",
    [((8, 8), 2, 2, 0), ((4, 20), 2, 2, 0), ((7, 7), 3, 2, 1), ((6, 6), 2, 1, 0)],
)
def test_an_inf_or_nan_in_dy_reaches_the_maximum_alone(torch, rng, spatial, k, s, p):
    """PyTorch sends ``dy`` to each window's maximum and nothing elsewhere: an inf there must
    not become ``inf * 0 = NaN`` at the window's other elements."""
    x = rng.standard_normal((2, 3, *spatial))
    geom = _geom(spatial, k, s, p, 1)
    y, state = max_pool_forward(x, geom)
    dy = rng.standard_normal(y.shape)
    dy[0, 0, 0, 0], dy[1, 2, -1, -1], dy[0, 1, 1, 0] = np.inf, -np.inf, np.nan
    _, tdx = _torch_max_pool(torch, x, dy, 2, k, s, p)
    dx = max_pool_backward(dy, state, geom, x.shape)
    np.testing.assert_allclose(dx, tdx, rtol=1e-15)  # overlapping windows: sums in any order
    assert np.isnan(dx).sum() == 1 and np.isinf(dx).sum() == 2


def test_with_freed_memory_kept_the_backward_permutes_as_far_as_the_forward(monkeypatch):
    """Its input-sized temporary then comes from memory already mapped."""
    shape, geom = (64, 32, 4, 4), ConvGeometry.make(2, 2, 2)  # 256 KiB of float64
    x = np.zeros(shape)
    for kept in (False, True):
        monkeypatch.setattr(pool, "keeps_freed_memory", lambda kept=kept: kept)
        assert pool._gathers(shape, x, geom) is True
        assert pool._gathers(shape, x, geom, backward=True) is kept
        assert pool._gathers(shape, x.astype(np.float16), geom, backward=True) is True  # 64 KiB


@pytest.mark.parametrize(
    "shape,dtype,forward,backward",
    [
        ((64, 32, 8, 8), np.float32, True, False),  # 512 KiB: the forward's limit, included
        ((65, 32, 8, 8), np.float32, False, False),
        ((64, 32, 8, 8), np.float16, True, False),  # 256 KiB, counted as 512 for the index
        ((65, 32, 8, 8), np.float16, False, False),
        ((15, 32, 8, 8), np.float32, True, True),  # 120 KiB: under the backward's limit
        ((16, 32, 8, 8), np.float32, True, False),  # 128 KiB: the backward's limit, excluded
    ],
)
def test_the_limits_at_their_edges(monkeypatch, shape, dtype, forward, backward):
    monkeypatch.setattr(pool, "keeps_freed_memory", lambda: False)
    geom, a = ConvGeometry.make(2, 2, 2), np.zeros(1, dtype)
    assert pool._gathers(shape, a, geom) is forward
    assert pool._gathers(shape, a, geom, backward=True) is backward


@pytest.mark.parametrize("dtype", ["bfloat16", np.float16])
@pytest.mark.parametrize("kernel, stride, pad", [(64, 64, 0), (16, 16, 0), (3, 2, 1)])
def test_a_16_bit_average_pooling_sums_its_window_in_float32(rng, dtype, kernel, stride, pad):
    """The window's views were added in the input's type: a global average over 64x64
    positions of 0.1 came out 0.0078 in bfloat16 and 0.0625 in float16 (ReLU's outputs, all
    positive, are what such a pooling meets)."""
    from distconv.layers import AvgPool2D

    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    x = rng.uniform(0.0, 1.0, (2, 3, 64, 64)).astype(dtype)
    x[1] = 0.1
    y = AvgPool2D(kernel, stride=stride, padding=pad)(Arg(x)).value
    assert y.dtype == dtype
    want = avg_pool_forward(x.astype(np.float64), ConvGeometry.make(2, kernel, stride, pad))
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2**-7)


@pytest.mark.parametrize("dtype", ["bfloat16", np.float16])
@pytest.mark.parametrize("kernel, stride, pad", [(32, 1, 0), (3, 1, 1), (5, 3, 2), (2, 2, 0)])
def test_a_16_bit_average_pooling_adds_overlapping_shares_in_float32(
    rng, dtype, kernel, stride, pad
):
    """Overlapping windows added their shares into an input element in its type: 32x32
    windows at stride 1 over ones gave bfloat16 an input gradient of 0.25 where 1 is right."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    geom = ConvGeometry.make(2, kernel, stride, pad)
    shape = (2, 3, 40, 40)
    dy = rng.uniform(0.0, 1.0, (2, 3, *geom.out_size(shape[2:]))).astype(dtype)
    dy[1] = 1.0
    want = avg_pool_backward(dy.astype(np.float64), geom, shape)
    got = avg_pool_backward(dy, geom, shape)
    assert got.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2**-7)
    before = np.ones(shape, dtype)  # added into a gradient already there, in place
    assert avg_pool_backward(dy, geom, shape, before) is before
    np.testing.assert_allclose(before.astype(np.float64), want + 1, rtol=2**-7)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("dtype", ["bfloat16", np.float16])
@pytest.mark.parametrize("kernel, stride, pad", [(32, 1, 0), (3, 1, 1), (3, 2, 0), (2, 2, 0)])
def test_a_16_bit_max_pooling_adds_overlapping_windows_gradients_in_float32(
    rng, dtype, kernel, stride, pad
):
    """An element that is the maximum of several overlapping windows takes each one's
    gradient, and they were added in dy's type: 1024 windows of 32x32 at stride 1 over one
    peak gave bfloat16 256 where 1024 is right, and a 3x3 pooling at stride 1 (Inception's)
    rounded about one element in four off the sum rounded once."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    geom = ConvGeometry.make(2, kernel, stride, pad)
    x64 = rng.standard_normal((2, 3, 64, 64))
    x64[1] = 0.0
    x64[1, :, 32, 32] = 5.0  # the maximum of every window over it
    x = x64.astype(dtype)
    dy = rng.standard_normal((2, 3, *geom.out_size(x.shape[2:]))).astype(dtype)
    dy[1] = 1.0
    y, state = max_pool_forward(x, geom)
    _, state64 = max_pool_forward(x.astype(np.float64), geom)
    want = max_pool_backward(dy.astype(np.float64), state64, geom, x.shape)
    got = max_pool_backward(dy, state, geom, x.shape)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(dtype).astype(np.float64))
    before = np.ones(x.shape, dtype)  # added into a gradient already there, in place
    assert max_pool_backward(dy, state, geom, x.shape, before) is before
    np.testing.assert_allclose(before.astype(np.float64), want + 1, rtol=2**-7, atol=2**-7)


def _pool_calls():
    g, x = ConvGeometry.make(2, 2, 2), np.ones((1, 3, 4, 4))
    _, state = max_pool_forward(x, g)
    return [
        # these computed with no error: a 3-D window over 2-D images pooled the first two
        # spatial axes only, and a dy that broadcasts was spread as if it were each window's
        (lambda: avg_pool_forward(x, ConvGeometry.make(3, 2)), r"expected 5-D images"),
        (lambda: avg_pool_backward(np.ones((1, 1, 1, 1)), g, x.shape), r"\(1, 1, 1, 1\) should"),
        (lambda: max_pool_backward(np.ones((1, 1, 2, 2)), state, g, x.shape), "should be"),
        # these failed in numpy's words: negative dimensions, a broadcast
        (lambda: max_pool_forward(x[..., :1, :1], g), r"kernel \(2, 2\) .* larger than"),
        (lambda: avg_pool_forward(x[..., :1, :1], g), "larger than"),
        (lambda: avg_pool_backward(np.ones((1, 3, 3, 3)), g, x.shape), "should be"),
    ]


@pytest.mark.parametrize("call, match", _pool_calls())
def test_the_pool_kernels_refuse_arrays_that_do_not_fit(call, match):
    """A kernel raises ValueError for bad shapes, naming them (docs/architecture.md)."""
    with pytest.raises(ValueError, match=match):
        call()
