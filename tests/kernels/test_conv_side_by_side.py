"""A convolution's input and weight gradients side by side on two threads (small batches and
images, where neither gradient is split over the threads): same bits, and the rule for when."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from distconv.kernels import conv as conv_module
from distconv.kernels import conv_layout
from distconv.kernels.conv import conv_backward, conv_forward
from distconv.kernels.conv_columns import Columns
from distconv.kernels.conv_layout import BESIDE_MIN_MACS, gradients_beside
from distconv.kernels.shape import ConvGeometry

LENET_CONV2 = 32 * 9  # column rows of LeNet's conv2: 32 channels, 3x3


@pytest.mark.parametrize(
    "n,side,threads,beside",
    [
        (16, 4, "2", False),  # the digits at batch 16: 4.7 M multiply-adds a gradient, too few
        (32, 4, "2", True),  # 9.4 M
        (64, 4, "2", True),
        (16, 14, "2", True),  # 58 M, one chunk
        (64, 14, "2", False),  # two chunks: each gradient is split over the threads already
        (64, 14, "1", True),  # nothing is split on one thread (side_by_side then runs in line)
    ],
)
def test_the_rule_for_lenets_conv2(monkeypatch, n, side, threads, beside):
    monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
    assert gradients_beside(n, LENET_CONV2 * side * side, 64, on_gpu=False) == beside


def test_the_rule_at_its_threshold_and_on_the_gpu(monkeypatch):
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    work = 4096  # one chunk for any batch here
    n = BESIDE_MIN_MACS // (work * 64)
    assert gradients_beside(n, work, 64, on_gpu=False)
    assert not gradients_beside(n - 1, work, 64, on_gpu=False)
    assert not gradients_beside(n, work, 64, on_gpu=True)


CASES = [
    # (N, C, side, O, stride, pad, dilation, groups, dtype)
    (32, 32, 4, 64, 1, 1, 1, 1, np.float32),  # LeNet's conv2 on the digits at batch 32
    (8, 16, 12, 32, 1, 1, 1, 2, np.float32),  # grouped
    (8, 12, 13, 24, 2, 2, 2, 1, np.float64),  # strided, dilated, float64
]


def _case(rng, n, c, side, o, stride, pad, dilation, groups, dtype):
    geom = ConvGeometry.make(2, 3, stride, pad, dilation, groups)
    x = rng.standard_normal((n, c, side, side)).astype(dtype)
    w = rng.standard_normal((o, c // groups, 3, 3)).astype(dtype)
    dy = rng.standard_normal((n, o, *geom.out_size((side, side)))).astype(dtype)
    return geom, x, w, dy


@pytest.mark.parametrize("case", CASES)
def test_side_by_side_gives_the_bits_of_one_after_the_other(rng, monkeypatch, pool_use, case):
    """1, 2 and 3 threads, with the forward's columns kept or not: the same bits; on 2 and 3
    the weight gradient really ran on a kernel thread."""
    monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)
    monkeypatch.setattr(conv_layout, "BESIDE_MIN_MACS", 1)  # every case here, whatever its size
    geom, x, w, dy = _case(rng, *case)
    where: list[str] = []
    real = conv_module.conv_forward

    def spy(*args, **kwargs):
        if kwargs.get("dw_from") is not None:
            where.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(conv_module, "conv_forward", spy)
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
        for keep in (False, True):
            columns = Columns() if keep else None
            conv_forward(x, w, geom, columns=columns)
            where.clear()
            results.append(conv_backward(dy, x, w, geom, columns=columns))
            on_pool = bool(where) and all(t.startswith("distconv-kernel") for t in where)
            assert on_pool == (threads != "1"), (threads, where)
    for dx, dw in results[1:]:
        np.testing.assert_array_equal(dx, results[0][0])
        np.testing.assert_array_equal(dw, results[0][1])
    assert pool_use  # the pool was handed work


def test_side_by_side_matches_torch(torch, rng, monkeypatch):
    """LeNet's conv2 on the digits at batch 64, past the rule's threshold as it stands."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    geom, x, w, dy = _case(rng, 64, 32, 4, 64, 1, 1, 1, 1, np.float32)
    assert gradients_beside(64, LENET_CONV2 * 16, 64, on_gpu=False)
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
