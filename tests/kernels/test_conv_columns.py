"""The forward's columns kept for the weight gradient: the same gradient from one build."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg
from distconv.kernels import conv as conv_module
from distconv.kernels import conv_layout
from distconv.kernels.conv import conv_backward, conv_forward
from distconv.kernels.conv_columns import Columns
from distconv.kernels.shape import ConvGeometry
from distconv.layers.base import forward_only
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


def test_a_layer_builds_its_columns_once_per_step(rng, monkeypatch):
    """Conv2D's forward keeps its columns and its backward reuses them: one build per chunk."""
    builds = _count_builds(monkeypatch)
    layer = Conv2D(8, 16, 3, padding=1)
    x = Arg(rng.standard_normal((4, 8, 6, 6)).astype(np.float32), needs_grad=False)
    out = layer.forward(x)
    layer.weight.grad = np.zeros_like(layer.weight.value)
    out.grad = np.ones_like(out.value)
    layer.backward(lambda p: None)
    assert builds[0] == 1  # one chunk, built in forward only


def test_forward_only_keeps_nothing(rng):
    layer = Conv2D(8, 16, 3, padding=1)
    x = Arg(rng.standard_normal((4, 8, 6, 6)).astype(np.float32))
    with forward_only():
        layer.forward(x)
    assert layer._columns is None
    layer.forward(x)
    assert layer._columns is not None and layer._columns.nbytes > 0


def test_the_autotuner_counts_a_rebuilt_chunk_once(rng, monkeypatch):
    monkeypatch.setenv("DISTCONV_AUTOTUNE", "1")
    monkeypatch.setattr(conv_layout, "_tuned", {})
    geom = ConvGeometry.make(2, 3, 1, 1)
    x = rng.standard_normal((4, 8, 6, 6)).astype(np.float32)
    w = rng.standard_normal((16, 8, 3, 3)).astype(np.float32)
    columns = Columns()
    conv_forward(x, w, geom, columns=columns)  # times both layouts, each twice
    assert columns.nbytes == sum(c.nbytes for c in columns._kept.values())


@pytest.mark.parametrize(
    "shape, dtype, staged",
    [
        ((24, 32, 4, 4), np.float32, True),  # rows of 2 KiB: staged
        ((20, 16, 8, 8), np.float64, True),  # 8 KiB
        ((24, 3, 5, 5), np.float32, False),  # 300 bytes: a view
        ((16, 32, 4, 4), np.float32, False),  # too few rows to stage (ALIASED_MIN_ROWS)
        ((20, 64, 8, 8), np.float32, True),  # 16 KiB: the largest staged
        ((20, 32, 28, 28), np.float32, False),  # 98 KiB rows: over ALIASED_MAX_ROW_BYTES
    ],
)
def test_batch_last_stages_rows_that_alias_and_holds_the_same_values(rng, shape, dtype, staged):
    from distconv.kernels.conv_columns import _batch_last

    x = rng.standard_normal((shape[0] + 4, *shape[1:])).astype(dtype)[2 : 2 + shape[0]]
    got = _batch_last(x)
    np.testing.assert_array_equal(got, np.moveaxis(x, 0, -1)[None])
    assert got.flags.c_contiguous == staged
    assert np.shares_memory(got, x) != staged


@pytest.mark.parametrize(
    "dtype, groups, chunk_work", [(np.float32, 1, None), (np.float64, 2, 20 * 32 * 9 * 16)]
)
def test_staging_changes_no_bit_of_a_batched_convolution(
    rng, monkeypatch, dtype, groups, chunk_work
):
    """LeNet's conv2 at the digits' 4x4 (rows of 2 KiB or more, staged from 17 samples) against
    the same convolution with staging off: the same values moved, the same matrices multiplied
    (grouped and in chunks of the batch too)."""
    monkeypatch.setattr(conv_layout, "BATCHED_MAX_POSITIONS", 10**9)
    if chunk_work is not None:  # two chunks of 20 samples, the second one offset
        monkeypatch.setattr("distconv.kernels.parallel.CHUNK_WORK", chunk_work)
    geom = ConvGeometry.make(2, 3, 1, 1, 1, groups)
    x = rng.standard_normal((40, 32, 4, 4)).astype(dtype)
    w = rng.standard_normal((64, 32 // groups, 3, 3)).astype(dtype)
    dy = rng.standard_normal((40, 64, 4, 4)).astype(dtype)
    staged = conv_forward(x, w, geom)[0], *conv_backward(dy, x, w, geom)
    monkeypatch.setattr("distconv.kernels.conv_columns.ALIASED_STRIDE", 1 << 40)
    plain = conv_forward(x, w, geom)[0], *conv_backward(dy, x, w, geom)
    for a, b in zip(staged, plain):
        np.testing.assert_array_equal(a, b)
