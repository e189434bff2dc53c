"""The forward's columns kept for the weight gradient: the same gradient from one build."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg
from distconv.kernels import conv as conv_module
from distconv.kernels import conv_layout
from distconv.kernels.conv import Columns, conv_backward, conv_forward
from distconv.kernels.shape import ConvGeometry
from distconv.layers.conv import Conv2D

# (N, C, spatial, O, groups): LeNet's conv2 and conv1 (wide and exact columns), a grouped one
SHAPES = [(6, 8, (6, 6), 16, 1), (5, 1, (9, 9), 12, 1), (4, 6, (5, 7), 4, 2)]


def _count_builds(monkeypatch) -> list[int]:
    calls = [0]
    real = conv_module.grouped_columns

    def counting(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(conv_module, "grouped_columns", counting)
    return calls


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_kept_columns_give_the_same_gradients_from_one_build(rng, monkeypatch, shape, batched):
    n, c, sp, o, g = shape
    monkeypatch.setattr(conv_layout, "BATCHED_MAX_POSITIONS", 10**9 if batched else 0)
    monkeypatch.setattr(conv_layout, "BATCHED_MIN_ROWS", 0)
    monkeypatch.setattr("distconv.kernels.parallel.CHUNK_WORK", 64)  # several chunks
    geom = ConvGeometry.make(2, 3, 1, 1, 1, g)
    x = rng.standard_normal((n, c, *sp)).astype(np.float32)
    w = rng.standard_normal((o, c // g, 3, 3)).astype(np.float32)
    y = conv_forward(x, w, geom)[0]
    dy = np.cos(y)
    want = conv_backward(dy, x, w, geom, need_dx=False)[1]

    builds = _count_builds(monkeypatch)
    columns = Columns()
    y_kept = conv_forward(x, w, geom, columns=columns)[0]
    chunks = builds[0]
    got = conv_backward(dy, x, w, geom, need_dx=False, columns=columns)[1]
    assert chunks > 1 and builds[0] == chunks  # the weight gradient built none of its own
    np.testing.assert_array_equal(y_kept, y)
    np.testing.assert_array_equal(got, want)


def test_columns_over_the_cap_are_rebuilt(rng, monkeypatch):
    geom = ConvGeometry.make(2, 3, 1, 1)
    x = rng.standard_normal((4, 8, 6, 6)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    dy = rng.standard_normal((4, 16, 6, 6)).astype(np.float32)
    builds = _count_builds(monkeypatch)
    columns = Columns(max_bytes=0)
    conv_forward(x, w, geom, columns=columns)
    got = conv_backward(dy, x, w, geom, need_dx=False, columns=columns)[1]
    assert columns.nbytes == 0 and builds[0] == 2  # one build in each direction
    np.testing.assert_array_equal(got, conv_backward(dy, x, w, geom, need_dx=False)[1])


def test_a_layer_backward_twice_adds_the_same_gradient_twice(rng):
    """The second backward rebuilds the columns the first one released."""
    layer = Conv2D(3, 5, 3, padding=1)
    x = Arg(rng.standard_normal((2, 3, 6, 6)).astype(np.float32))
    out = layer.forward(x)
    layer.weight.grad = np.zeros_like(layer.weight.value)
    out.grad = np.ones_like(out.value)
    layer.backward(lambda p: None)
    once = layer.weight.grad.copy()
    assert layer._columns is None
    layer.backward(lambda p: None)
    np.testing.assert_array_equal(layer.weight.grad, 2 * once)
