"""bfloat16 images under bfloat16 weights convolve to bfloat16, where a fully connected layer's
``ml_dtypes`` matmul gives float32 (docs/architecture.md, "Arrays and devices"): each output is
the float32 convolution rounded once, on every route of the kernels (col2im, the dense
transposed product from 128 samples on, strides, the per-sample kernel of ConvOperator)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.kernels.conv_per_sample import per_sample_conv_forward
from distconv.kernels.shape import ConvGeometry
from distconv.layers import Conv2D, ConvTranspose2D, FullyConnected

bfloat16 = pytest.importorskip("ml_dtypes").bfloat16
F32 = np.float32


def _pair(cls, **options):
    """A bfloat16 layer with random weights, and its float32 twin holding the same values."""
    narrow = cls(8, 6, 3, bias=None, dtype=bfloat16, **options)
    rng = np.random.default_rng(1)
    narrow.weight.value[...] = rng.standard_normal(narrow.weight.shape).astype(bfloat16)
    wide = cls(8, 6, 3, bias=None, dtype=F32, **options)
    wide.weight.value[...] = narrow.weight.value.astype(F32)
    return narrow, wide


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("cls", "options", "shape"),
    [
        (Conv2D, {}, (4, 8, 9, 9)),
        (Conv2D, {"stride": 2}, (4, 8, 9, 9)),
        (ConvTranspose2D, {}, (4, 8, 9, 9)),  # col2im
        (ConvTranspose2D, {"stride": 2}, (4, 8, 9, 9)),
        (ConvTranspose2D, {}, (128, 8, 2, 2)),  # the dense product
    ],
)
def test_a_bfloat16_convolution_is_the_float32_one_rounded_once(cls, options, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(bfloat16)
    narrow, wide = _pair(cls, **options)
    y = narrow(Arg(x)).value
    assert y.dtype == bfloat16
    np.testing.assert_array_equal(y, wide(Arg(x.astype(F32))).value.astype(bfloat16))


@pytest.mark.timeout(60)
def test_the_per_sample_kernel_rounds_once_too():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 6, 6)).astype(bfloat16)
    w = rng.standard_normal((3, 5, 4, 3, 3)).astype(bfloat16)  # one bank a sample
    geom = ConvGeometry((3, 3), (1, 1), (1, 1), (1, 1), 1)
    y = per_sample_conv_forward(x, w, geom)
    assert y.dtype == bfloat16
    want = per_sample_conv_forward(x.astype(F32), w.astype(F32), geom).astype(bfloat16)
    np.testing.assert_array_equal(y, want)


def test_a_fully_connected_layer_gives_float32_as_the_docs_say():
    x = np.random.default_rng(3).standard_normal((2, 6)).astype(bfloat16)
    assert FullyConnected(6, 3, dtype=bfloat16)(Arg(x)).value.dtype == F32
