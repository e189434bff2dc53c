"""A convolution's input and weight gradients side by side on two threads (small batches and
images, where neither gradient is split over the threads): same bits, and the rule for when."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.kernels import conv as conv_module
from distconv.kernels import conv_layout
from distconv.kernels.conv import conv_backward, conv_forward
from distconv.kernels.conv_columns import Columns
from distconv.kernels.conv_layout import BESIDE_MIN_MACS, gradients_beside
from distconv.kernels.shape import ConvGeometry


def _beside(n, c, side, o=64, groups=1, stride=1):
    geom = ConvGeometry.make(2, 3, stride, 1, 1, groups)
    x_shape, w_shape = (n, c, side, side), (o, c // groups, 3, 3)
    return gradients_beside(x_shape, w_shape, geom.out_size((side, side)), geom, on_gpu=False)


@pytest.mark.parametrize(
    "n,side,threads,beside",
    [
        (16, 4, "2", False),  # LeNet's conv2 on the digits, batch 16: 4.7 M multiply-adds, too few
        (32, 4, "2", True),  # 9.4 M
        (64, 4, "2", True),
        (128, 4, "2", False),  # the input gradient goes by the dense product, which splits itself
        (16, 14, "2", True),  # 58 M, one chunk
        (64, 14, "2", False),  # two chunks: each gradient is split over the threads already
        (64, 14, "1", True),  # nothing is split on one thread (side_by_side then runs in line)
    ],
)
def test_the_rule_for_lenets_conv2(monkeypatch, n, side, threads, beside):
    monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
    assert _beside(n, 32, side) == beside


def test_the_rule_counts_groups_and_the_output_positions(monkeypatch):
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    assert _beside(32, 32, 4) and not _beside(32, 32, 4, groups=2)  # 9.4 M, then 4.7 M
    assert _beside(32, 32, 8, stride=2) and not _beside(16, 32, 8, stride=2)  # 4x4 outputs


def test_the_rule_at_its_threshold_and_on_the_gpu(monkeypatch):
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    geom = ConvGeometry.make(2, 1)  # 1x1: one column element a pixel and channel
    n = BESIDE_MIN_MACS // (16 * 16 * 64)  # C16 on 16 positions, O64
    args = ((16, 4, 4), (64, 16, 1, 1), (4, 4), geom)
    assert gradients_beside((n, *args[0]), *args[1:], on_gpu=False)
    assert not gradients_beside((n - 1, *args[0]), *args[1:], on_gpu=False)
    assert not gradients_beside((n, *args[0]), *args[1:], on_gpu=True)


@pytest.mark.parametrize(
    "shape,beside",
    [
        ((16, 32, 4, 64, 1, 1, 1, 1, np.float32), False),
        ((32, 32, 4, 64, 1, 1, 1, 1, np.float32), True),
        ((32, 32, 4, 64, 1, 1, 1, 2, np.float32), False),  # grouped: half the multiply-adds
        ((16, 32, 8, 64, 2, 1, 1, 1, np.float32), False),  # strided: 4x4 outputs of 8x8
        ((64, 32, 14, 64, 1, 1, 1, 1, np.float32), False),  # split over the threads
        ((128, 32, 4, 64, 1, 1, 1, 1, np.float32), False),  # the dense input gradient
    ],
)
def test_conv_backward_follows_the_rule(rng, monkeypatch, shape, beside):
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)
    calls: list[int] = []
    real = conv_module.side_by_side
    monkeypatch.setattr(conv_module, "side_by_side", lambda *f: calls.append(1) or real(*f))
    geom, x, w, dy = _case(rng, *shape)
    dx, dw = conv_backward(dy, x, w, geom)
    assert bool(calls) == beside
    assert dx.shape == x.shape and dw.shape == w.shape


CASES = [
    # (N, C, side, O, stride, pad, dilation, groups, dtype): each input-gradient route
    (32, 32, 4, 64, 1, 1, 1, 1, np.float32),  # batched columns and col2im (LeNet's conv2)
    (8, 16, 12, 32, 1, 1, 1, 2, np.float32),  # the same, grouped
    (8, 12, 13, 24, 2, 2, 2, 1, np.float64),  # strided, dilated
    (4, 64, 6, 32, 1, 1, 1, 1, np.float32),  # the flipped kernel (64 channels fan in to 32)
    (2, 8, 30, 8, 1, 1, 1, 1, np.float64),  # per sample, wide columns (900 positions)
    (2, 16, 30, 16, 1, 1, 1, 1, np.float32),  # per sample, shifted taps
]


def _case(rng, n, c, side, o, stride, pad, dilation, groups, dtype):
    geom = ConvGeometry.make(2, 3, stride, pad, dilation, groups)
    x = rng.standard_normal((n, c, side, side)).astype(dtype)
    w = rng.standard_normal((o, c // groups, 3, 3)).astype(dtype)
    dy = rng.standard_normal((n, o, *geom.out_size((side, side)))).astype(dtype)
    return geom, x, w, dy


@pytest.mark.parametrize(
    "case,poison",
    [(c, None) for c in CASES] + [(CASES[0], "inf in w"), (CASES[3], "nan in dy")],
)
def test_side_by_side_gives_the_bits_of_one_after_the_other(
    rng, monkeypatch, pool_use, case, poison
):
    """1, 2 and 3 threads, with the forward's columns kept or not: the same bits, the two
    gradients handed to side_by_side each time (which puts the second on the pool with 2 and 3
    threads: tests/kernels/test_parallel.py). Every input-gradient route, and the exact ones a
    non-finite value sends the gradients to."""
    monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)
    monkeypatch.setattr(conv_layout, "BESIDE_MIN_MACS", 1)  # every case here, whatever its size
    geom, x, w, dy = _case(rng, *case)
    if poison == "inf in w":
        w[0, 0, 1, 1] = np.inf
    elif poison == "nan in dy":
        dy[0, 0, 1, 1] = np.nan
    pairs: list[tuple[str, str]] = []
    real = conv_module.side_by_side

    def spy(first, second):
        pairs.append((first.__name__, second.__name__))
        return real(first, second)

    monkeypatch.setattr(conv_module, "side_by_side", spy)
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
        for keep in (False, True):
            columns = Columns() if keep else None
            conv_forward(x, w, geom, columns=columns)
            pairs.clear()
            pool_use.clear()
            results.append(conv_backward(dy, x, w, geom, columns=columns))
            # the weight gradient is the one handed to the pool (the input gradient is longer)
            assert pairs == [("input_grad", "weight_grad")]
            assert bool(pool_use) == (threads != "1")
    for dx, dw in results[1:]:  # NaNs compare equal, each in its place
        np.testing.assert_array_equal(dx, results[0][0])
        np.testing.assert_array_equal(dw, results[0][1])
    dx, dw = results[0]
    if poison == "inf in w":  # the weight gradient does not see w
        assert not np.isfinite(dx).all() and np.isfinite(dw).all()
    elif poison == "nan in dy":
        assert np.isnan(dx).any() and np.isnan(dw).any()


def test_side_by_side_matches_torch(torch, rng, monkeypatch):
    """LeNet's conv2 on the digits at batch 64, past the rule's threshold as it stands."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    geom, x, w, dy = _case(rng, 64, 32, 4, 64, 1, 1, 1, 1, np.float32)
    assert _beside(64, 32, 4)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.nn.functional.conv2d(tx, tw, None, 1, 1).backward(torch.tensor(dy))
    dx, dw = conv_backward(dy, x, w, geom)
    np.testing.assert_allclose(dx, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("need", [(True, False), (False, True)])
def test_one_gradient_alone_runs_here(rng, monkeypatch, pool_use, need):
    """Only the gradient asked for, on the caller's thread (a first layer wants no dx)."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    geom, x, w, dy = _case(rng, 64, 32, 4, 64, 1, 1, 1, 1, np.float32)
    dx, dw = conv_backward(dy, x, w, geom, need_dx=need[0], need_dw=need[1])
    assert (dx is not None, dw is not None) == need
    assert not pool_use
