"""Stride-1 convolutions by one BLAS product per kernel tap, and the gemm binding under them."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.kernels import blas, conv_layout, conv_shifted
from distconv.kernels.conv import conv_any_forward, conv_backward, conv_forward
from distconv.kernels.shape import ConvGeometry

needs_blas = pytest.mark.skipif(
    not blas.available(np.float32), reason="no OpenBLAS cblas_sgemm found in this process"
)

# (N, C, H, W, O, kernel, pad, dilation, groups): each has >= 16 channels a group both ways
CASES = [
    (3, 16, 9, 9, 16, 3, 1, 1, 1),
    (2, 32, 7, 8, 48, 3, 0, 1, 2),  # grouped, no padding: the input gradient goes by col2im
    (2, 16, 10, 10, 32, 3, 2, 2, 1),  # dilated
    (2, 16, 8, 6, 16, (3, 2), (1, 0), 1, 1),
    (3, 16, 11, 11, 16, 5, 2, 1, 1),
    (2, 32, 6, 7, 32, 3, 1, 1, 1),  # blocks of 32 x 32: the weight gradient by taps too
    (2, 64, 5, 5, 64, 3, 1, 1, 2),
]


@pytest.fixture(autouse=True)
def _per_sample(monkeypatch):
    """The shifted products replace the per-sample layout: force it for these small images."""
    monkeypatch.setattr(conv_layout, "BATCHED_MAX_POSITIONS", 0)
    monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)


def _case(rng, n, c, h, w_, o, k, p, d, g, dtype=np.float64):
    geom = ConvGeometry.make(2, k, 1, p, d, g)
    x = rng.standard_normal((n, c, h, w_)).astype(dtype)
    w = rng.standard_normal((o, c // g, *geom.ksize)).astype(dtype)
    return geom, x, w


def _count_gemms(monkeypatch) -> list[int]:
    calls = [0]
    real = blas.gemm

    def counting(*args):
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(conv_shifted.blas, "gemm", counting)
    return calls


@needs_blas
@pytest.mark.parametrize("case", CASES)
def test_matches_torch_in_float64_every_direction(torch, rng, monkeypatch, case):
    geom, x, w = _case(rng, *case)
    assert conv_shifted.shifted_applies(x, w, geom)
    gemms = _count_gemms(monkeypatch)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, None, 1, geom.pad, geom.dilation, geom.groups)
    dy = rng.standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(dy))
    y, _ = conv_forward(x, w, geom)
    dx, dw = conv_backward(dy, x, w, geom)
    # forward, input gradient (and weight gradient where its blocks are large enough): one
    # product per sample, group and tap each
    passes = 3 if conv_shifted.shifted_weight_grad_pays(x, dy, w, geom) else 2
    assert gemms[0] == passes * x.shape[0] * geom.groups * geom.kernel_volume
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-10, atol=1e-10)


@needs_blas
def test_float32_agrees_with_the_im2col_path(rng, monkeypatch):
    geom, x, w = _case(rng, *CASES[5], dtype=np.float32)
    dy = rng.standard_normal((2, 32, 6, 7)).astype(np.float32)
    gemms = _count_gemms(monkeypatch)
    shifted = (conv_forward(x, w, geom)[0], *conv_backward(dy, x, w, geom))
    assert gemms[0] == 3 * 2 * 9
    monkeypatch.setattr(conv_shifted, "SHIFTED_MIN_CHANNELS", 10**9)
    im2col = (conv_forward(x, w, geom)[0], *conv_backward(dy, x, w, geom))
    for a, b in zip(shifted, im2col):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


@needs_blas
def test_bitwise_the_same_for_1_2_3_threads(rng, monkeypatch):
    monkeypatch.setattr("distconv.kernels.parallel.MIN_WORK_PER_THREAD", 1)
    monkeypatch.setattr("distconv.kernels.parallel.CHUNK_WORK", 5000)  # a chunk per sample
    geom, x, w = _case(rng, 6, 32, 12, 12, 32, 3, 1, 1, 1, dtype=np.float32)
    dy = rng.standard_normal((6, 32, 12, 12)).astype(np.float32)
    gemms = _count_gemms(monkeypatch)
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
        results.append((conv_forward(x, w, geom)[0], *conv_backward(dy, x, w, geom)))
    assert gemms[0] == 3 * 3 * 6 * 9  # three thread counts, three directions, by taps
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


@needs_blas
def test_large_images_take_it_under_the_default_cost_model(rng, monkeypatch):
    monkeypatch.undo()  # the real cost model: 36 x 36 = 1296 positions run per sample
    geom, x, w = _case(rng, 2, 32, 36, 36, 32, 3, 1, 1, 1)
    gemms = _count_gemms(monkeypatch)
    y, _ = conv_forward(x, w, geom)
    assert gemms[0] == 2 * 9
    monkeypatch.setattr(conv_shifted, "SHIFTED_MIN_CHANNELS", 10**9)
    np.testing.assert_allclose(y, conv_forward(x, w, geom)[0], rtol=1e-10, atol=1e-10)


@needs_blas
def test_a_gradient_of_another_dtype_takes_the_columns(rng, monkeypatch):
    """BLAS multiplies one type: float32 x and w with a float64 dy give im2col's result."""
    geom, x, w = _case(rng, *CASES[5], dtype=np.float32)
    dy = rng.standard_normal((2, 32, 6, 7))
    got = conv_backward(dy, x, w, geom, need_dx=False)[1]
    monkeypatch.setattr(conv_shifted, "SHIFTED_MIN_CHANNELS", 10**9)
    want = conv_backward(dy, x, w, geom, need_dx=False)[1]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_without_a_blas_binding_the_columns_path_runs(rng, monkeypatch):
    monkeypatch.setattr(conv_shifted.blas, "available", lambda dtype: False)
    geom, x, w = _case(rng, *CASES[5])
    assert not conv_shifted.shifted_applies(x, w, geom)
    y, _ = conv_forward(x, w, geom)
    assert y.shape == (2, 32, 6, 7) and np.isfinite(y).all()


@needs_blas
def test_only_where_it_applies(rng):
    geom, x, w = _case(rng, *CASES[0])
    assert conv_shifted.shifted_applies(x, w, geom)
    assert not conv_shifted.shifted_applies(x, w, ConvGeometry.make(2, 3, 2, 1))  # stride 2
    assert not conv_shifted.shifted_applies(x[:, :8], w[:, :8], geom)  # 8 input channels
    assert not conv_shifted.shifted_applies(x, w[:8], geom)  # 8 outputs
    assert not conv_shifted.shifted_applies(x.astype(np.float16), w.astype(np.float16), geom)
    x3, w3 = x[..., None], w[..., None]
    assert not conv_shifted.shifted_applies(x3, w3, ConvGeometry.make(3, (3, 3, 1), 1, 1))


@needs_blas
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_reads_windows_and_transposed_views_in_place(rng, dtype):
    big = rng.standard_normal((50, 70)).astype(dtype)
    a = big[3:13, 5:25]  # rows 70 elements apart
    b = rng.standard_normal((30, 20)).astype(dtype).T  # a transposed view
    c = rng.standard_normal((10, 30)).astype(dtype)
    want = a.astype(np.float64) @ b + c
    blas.gemm(a, b, c, 1.0)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)
    out = np.full((10, 30), np.nan, dtype)  # beta = 0 ignores what c held
    blas.gemm(a, b, out, 0.0)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


@needs_blas
def test_gemm_refuses_what_it_cannot_read(rng):
    a = rng.standard_normal((4, 6)).astype(np.float32)
    with pytest.raises(ValueError, match="do not chain"):
        blas.gemm(a, a, np.empty((4, 6), np.float32), 0.0)
    with pytest.raises(ValueError, match="no BLAS gemm"):
        blas.gemm(a, a.T.astype(np.float64), np.empty((4, 4), np.float32), 0.0)
    with pytest.raises(ValueError, match="unit stride"):
        blas.gemm(a[:, ::2], a[:, ::2].T, np.empty((4, 4), np.float32), 0.0)
    with pytest.raises(ValueError, match="overlaps"):
        blas.gemm(a[:, :4], a[:4, :4], a[:, :4], 0.0)


@needs_blas
def test_gemm_with_an_empty_inner_dimension_scales_c(rng):
    c = np.full((3, 2), np.nan, np.float32)
    blas.gemm(np.empty((3, 0), np.float32), np.empty((0, 2), np.float32), c, 0.0)
    assert (c == 0).all()
    c = np.ones((3, 2), np.float32)
    blas.gemm(np.empty((3, 0), np.float32), np.empty((0, 2), np.float32), c, 2.0)
    assert (c == 2).all()


def _views(dy):
    return {
        "channels reversed": dy[:, ::-1],
        "broadcast": np.broadcast_to(dy[:, :1], dy.shape),
        "spatially reversed": dy[..., ::-1, :],
        "fortran order": np.asfortranarray(dy),
    }


@needs_blas
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "view", ["channels reversed", "broadcast", "spatially reversed", "fortran order"]
)
@pytest.mark.parametrize("k, p", [(1, 0), ((3, 1), (1, 0))])
def test_any_view_of_dy_with_a_kernel_one_pixel_wide(rng, monkeypatch, view, k, p):
    """One pixel wide, ``dy`` needs no widening and reached BLAS as the caller's view: any
    strides numpy allows, which BLAS may not read in place. Both gradients and the transposed
    forward take the taps and give what a contiguous copy of ``dy`` gives."""
    geom = ConvGeometry.make(2, k, 1, p)
    x = rng.standard_normal((2, 32, 6, 7))
    w = rng.standard_normal((32, 32, *geom.ksize))
    dy = _views(rng.standard_normal((2, 32, 6, 7)))[view]
    gemms = _count_gemms(monkeypatch)
    got = conv_backward(dy, x, w, geom)
    got_t = conv_any_forward(dy, w, geom, True, (6, 7))
    assert gemms[0] == 3 * 2 * geom.kernel_volume  # dx, dw, the transposed forward by taps
    dense = np.ascontiguousarray(dy)
    for a, b in zip(
        (*got, got_t),
        (*conv_backward(dense, x, w, geom), conv_any_forward(dense, w, geom, True, (6, 7))),
    ):
        np.testing.assert_array_equal(a, b)


@needs_blas
def test_a_contiguous_dy_reaches_blas_uncopied(rng):
    geom = ConvGeometry.make(2, 1)
    taps = conv_shifted.Taps(rng.standard_normal((32, 32, 1, 1)), geom, (6, 7))
    dy = rng.standard_normal((4, 32, 6, 7))[1:3]  # a chunk of the batch
    assert np.shares_memory(conv_shifted._wide(dy, taps), dy)
