"""The finiteness check that picks a convolution's exact route (:mod:`distconv.kernels.finite`)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.kernels.finite import all_finite

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("layout", ["contiguous", "strided", "fortran"])
def test_one_inf_or_nan_anywhere_is_found(dtype, bad, layout):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 7, 1 << 14)).astype(
        dtype
    )  # past _DOT_FROM, and its strided view too
    views = {"contiguous": a, "strided": a[:, ::2], "fortran": np.asfortranarray(a)}
    assert all_finite(views[layout])
    for index in [(0, 0, 0), (5, 6, -1), (3, 2, 1), (4, 5, 9999)]:
        b = a.copy()
        b[index] = bad
        view = {"contiguous": b, "strided": b[:, ::2], "fortran": np.asfortranarray(b)}[layout]
        expected = bool(np.isfinite(view).all())  # the strided view skips odd rows
        assert all_finite(view) == expected, (index, layout)


def test_an_overflowing_sum_of_squares_only_errs_towards_the_exact_route():
    """Finite values whose squares sum past float32's range are reported as not finite (the
    exact route is right for them too); values of any usual size are finite."""
    assert all_finite(np.full(10**6, 1e15, dtype=np.float32))
    assert not all_finite(np.full(1 << 16, 1e20, dtype=np.float32))
    assert all_finite(np.zeros(0, dtype=np.float32))
    assert all_finite(np.full(4, 1e20, dtype=np.float32))  # small: checked element-wise
    assert all_finite(np.arange(5))  # integers: never inf or NaN
