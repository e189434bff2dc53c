"""The input gradient (and the transposed forward) where ``dy`` or the weight holds an inf or
NaN: NaN exactly where the definition's sum over connected pixel pairs has one, on every route.

The fast routes multiply zeros that stand for no pixel pair (the dense matrix's unconnected
entries, wide columns' junk, the flipped convolution's padding of ``dy``): ``inf * 0`` there
made NaN where the definition (and PyTorch) sum no such product.
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.kernels import blas, conv_layout, conv_per_sample
from distconv.kernels import conv as conv_module
from distconv.kernels.conv import conv_any_forward, conv_backward
from distconv.kernels.conv_per_sample import per_sample_conv_backward
from distconv.kernels.shape import ConvGeometry

pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered")


def _definition_dx(dy, w, geom, x_shape):
    """``dx`` as the definition's sum: each tap's products with ``dy`` added at the pixels that
    tap connects; products landing in the padding belong to no pair and are dropped."""
    n, c = x_shape[:2]
    o, cg = w.shape[:2]
    G = geom.groups
    padded = tuple(s + 2 * p for s, p in zip(x_shape[2:], geom.pad))
    dx = np.zeros((n, c, *padded))
    out = dy.shape[2:]
    gy = dy.reshape(n, G, o // G, -1)
    for tap in np.ndindex(*geom.ksize):
        sl = tuple(
            slice(t * d, t * d + s * (m - 1) + 1, s)
            for t, d, s, m in zip(tap, geom.dilation, geom.stride, out)
        )
        wk = w[(slice(None), slice(None)) + tap].reshape(G, o // G, cg)
        dx[(slice(None), slice(None)) + sl] += np.einsum("goc,ngol->ngcl", wk, gy).reshape(
            n, c, *out
        )
    crop = tuple(slice(p, p + s) for p, s in zip(geom.pad, x_shape[2:]))
    return dx[(slice(None), slice(None)) + crop]


def _hits(dy, w, what):
    """``(dy, w)`` with ``what`` at each tap of the first filter, or each pixel of sample 1's
    first plane of ``dy``, in turn."""
    if what == "inf in w":
        for tap in np.ndindex(*w.shape[2:]):
            hit = w.copy()
            hit[(0, 0, *tap)] = np.inf
            yield dy, hit
        return
    for pos in np.ndindex(*dy.shape[2:]):
        hit = dy.copy()
        hit[(1, 0, *pos)] = np.inf if what.startswith("inf") else np.nan
        yield hit, w


# (nd, N, C, spatial, O, k, stride, pad, dilation, groups) by the route a finite call takes
ROUTES = [
    ("dense", (2, 3, 2, (4, 4), 3, 3, 1, 1, 1, 1)),
    ("dense", (3, 2, 2, (3, 3, 3), 2, 3, 1, 1, 1, 1)),
    ("col2im wide", (2, 2, 3, (7, 6), 4, 3, 1, 0, 1, 1)),
    ("col2im wide", (2, 2, 4, (8, 7), 4, 3, 2, 1, 1, 2)),
    ("col2im wide", (1, 2, 3, (11,), 2, 3, 2, 1, 2, 1)),
    ("col2im wide", (3, 2, 2, (5, 6, 4), 3, 3, 2, 1, 1, 1)),
    ("flip", (2, 2, 4, (6, 6), 3, 3, 1, 1, 1, 1)),
    ("flip", (2, 2, 4, (6, 5), 4, 3, 1, (2, 1), (2, 1), 2)),
    ("flip", (3, 2, 3, (4, 4, 4), 2, 3, 1, 1, 1, 1)),
    ("flip", (1, 2, 4, (9,), 2, 3, 1, 2, 2, 2)),
    ("shifted taps", (2, 2, 16, (8, 8), 16, 3, 1, 0, 1, 1)),
    ("batched", (2, 3, 2, (6, 5), 3, 3, 1, 1, 1, 1)),
    ("batched", (3, 2, 2, (4, 4, 3), 3, 3, 1, 1, 1, 1)),
]

#: the function each route's finite call runs, spied on to show the route is the one named
_SPIED = {
    "dense": "conv_backward_data_dense",
    "col2im wide": "col2im_wide",
    "flip": "_conv_backward_data_by_flip",
    "shifted taps": "data_grad_chunk",
    "batched": "col2im_batched",
}


def _force(monkeypatch, route):
    monkeypatch.delenv("DISTCONV_AUTOTUNE", raising=False)
    batched = route == "batched"
    monkeypatch.setattr(conv_layout, "BATCHED_MAX_POSITIONS", 10**9 if batched else 0)
    monkeypatch.setattr(conv_layout, "BATCHED_MIN_ROWS", 0)
    dense = route == "dense"
    monkeypatch.setattr(conv_layout, "DENSE_MAX_WORK_RATIO", 10**9 if dense else 0)
    monkeypatch.setattr(conv_layout, "DENSE_MIN_BATCH", 1)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("call", ["input gradient", "transposed forward"])
@pytest.mark.parametrize("what", ["inf in w", "inf in dy", "nan in dy"])
@pytest.mark.parametrize("route, case", ROUTES)
def test_non_finite_values_make_nan_exactly_where_the_definition_does(
    rng, monkeypatch, route, case, what, call
):
    if route == "shifted taps" and not blas.available(np.float64):
        pytest.skip("no OpenBLAS cblas_dgemm found in this process")
    nd, n, c, sp, o, k, s, p, d, g = case
    geom = ConvGeometry.make(nd, k, s, p, d, g)
    x_shape = (n, c, *sp)
    w = rng.standard_normal((o, c // g, *geom.ksize))
    dy = rng.standard_normal((n, o, *geom.out_size(sp)))
    _force(monkeypatch, route)

    def dx_of(dy, w):
        if call == "transposed forward":  # the same adjoint, with dy as the layer's input
            return conv_any_forward(dy, w, geom, True, sp)
        return conv_backward(dy, np.zeros(x_shape), w, geom, need_dw=False)[0]

    spied = []
    real = getattr(conv_module, _SPIED[route])
    monkeypatch.setattr(conv_module, _SPIED[route], lambda *a: spied.append(1) or real(*a))
    np.testing.assert_allclose(dx_of(dy, w), _definition_dx(dy, w, geom, x_shape), rtol=1e-10)
    assert spied  # a finite call takes the route named
    for dy_hit, w_hit in _hits(dy, w, what):
        want = _definition_dx(dy_hit, w_hit, geom, x_shape)
        np.testing.assert_allclose(dx_of(dy_hit, w_hit), want, rtol=1e-10, atol=1e-10)


# (nd, C, O, size, kernel, stride, padding, dilation, groups), flipped or not
PER_SAMPLE = [
    ((2, 2, 3, 7, 3, 1, 0, 1, 1), False),  # col2im wide
    ((2, 4, 4, 7, 3, 2, 1, 1, 2), False),
    ((1, 3, 2, 9, 3, 2, 1, 1, 1), False),
    ((3, 3, 3, 4, 3, 1, 1, 1, 1), True),  # by the flipped filters
    ((2, 4, 3, 6, 3, 1, 1, 1, 1), True),
    ((1, 4, 2, 9, 3, 1, 2, 2, 2), True),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("what", ["inf in w", "inf in dy"])
@pytest.mark.parametrize("case, flips", PER_SAMPLE)
def test_per_sample_input_gradient_has_nan_only_where_the_definition_does(
    rng, monkeypatch, case, flips, what
):
    nd, c, o, size, k, s, p, d, g = case
    geom = ConvGeometry.make(nd, k, s, p, d, g)
    x = rng.standard_normal((2, c) + (size,) * nd)
    w = rng.standard_normal((2, o, c // g) + (k,) * nd)
    dy = rng.standard_normal((2, o, *geom.out_size(x.shape[2:])))
    calls = []
    real = conv_per_sample.flip_weight
    monkeypatch.setattr(conv_per_sample, "flip_weight", lambda *a: calls.append(1) or real(*a))
    _, dw = per_sample_conv_backward(dy, x, w, geom)
    assert bool(calls) == flips  # a finite call takes the route named
    hits = _hits(dy, w[0], what) if what == "inf in w" else _hits(dy, w, what)
    for dy_hit, w_hit in hits:
        w_hit = np.stack([w_hit, w[1]]) if what == "inf in w" else w_hit
        dx, dw_hit = per_sample_conv_backward(dy_hit, x, w_hit, geom)
        for i in range(2):
            want = _definition_dx(dy_hit[i : i + 1], w_hit[i], geom, (1, *x.shape[1:]))
            np.testing.assert_allclose(dx[i : i + 1], want, rtol=1e-10, atol=1e-10)
        if what == "inf in w":  # the filter gradient does not read the filters
            np.testing.assert_allclose(dw_hit, dw, rtol=1e-10, atol=1e-12)
