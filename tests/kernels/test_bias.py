"""A bias's gradient: sums over the batch, and for a shared bias per channel over the positions."""

import numpy as np
import pytest

from distconv.kernels.bias import channel_sums, row_sums


@pytest.mark.parametrize(
    "shape, channels",
    [((6, 4, 3, 5), 4), ((5, 3, 2, 2, 3), 3), ((7, 12), 3), ((1, 2, 3, 3), 2), ((0, 4, 3, 3), 4)],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_channel_sums_are_the_sums_over_batch_and_positions(rng, shape, channels, dtype):
    g = rng.standard_normal(shape).astype(dtype)
    got = channel_sums(g, channels)
    per_channel = int(np.prod(shape[1:])) // channels
    want = g.astype(np.float64).reshape(shape[0], channels, per_channel).sum(axis=(0, 2))
    assert got.shape == (channels,) and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5, atol=1e-6)


def _sixteen_bit():
    kinds = [np.dtype(np.float16)]
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes is in the test extra
        return kinds
    return [*kinds, np.dtype(ml_dtypes.bfloat16)]


@pytest.mark.parametrize("batch", [64, 1])
@pytest.mark.parametrize("dtype", _sixteen_bit(), ids=str)
def test_sixteen_bit_gradients_are_summed_in_float32(rng, dtype, batch):
    """Sums of 16 to 1024 values: 16-bit running sums would lose digits that a float32
    accumulator keeps; the result comes back in the gradient's dtype, rounded once."""
    g = (rng.standard_normal((batch, 8, 4, 4)) + 3.0).astype(dtype)
    got = channel_sums(g, 8)
    want = g.astype(np.float64).sum(axis=(0, 2, 3))
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want.astype(dtype))


def test_a_strided_gradient(rng):
    g = rng.standard_normal((6, 8, 5, 5))[:, ::2]  # every other channel: not contiguous
    np.testing.assert_allclose(channel_sums(g, 4), g.sum(axis=(0, 2, 3)), rtol=1e-12)


@pytest.mark.parametrize("dtype", _sixteen_bit(), ids=str)
def test_row_sums_of_sixteen_bit_gradients_are_summed_in_float32(rng, dtype):
    """A fully connected layer's bias gradient over a batch of 3000: numpy's own sum of
    bfloat16 rows stops growing (it adds in bfloat16), one of float16 drifts."""
    g = (rng.standard_normal((3000, 5)) * 0.1 + 1.0).astype(dtype)
    got = row_sums(g)
    want = g.astype(np.float64).sum(axis=0)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, want.astype(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_sums_of_wide_gradients_are_numpys_own(rng, dtype):
    g = rng.standard_normal((33, 7)).astype(dtype)
    np.testing.assert_array_equal(row_sums(g), g.sum(axis=0))  # bitwise: the same call
