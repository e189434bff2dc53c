"""The finiteness check (:func:`distconv.backend.all_finite`) as the convolutions' exact-route
choice calls it (:mod:`distconv.kernels.finite`): on the dot-product path and off it."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.backend import all_finite
from distconv.kernels.finite import DOT_FROM, not_finite_on_cpu

pytestmark = pytest.mark.timeout(30)

#: C-contiguous and past DOT_FROM (the dot path); a view with an offset, still contiguous;
#: strided and Fortran-ordered (the isfinite path)
LAYOUTS = {
    "contiguous": lambda a: a,
    "offset view": lambda a: a[1:],
    "strided": lambda a: a[:, ::2],
    "fortran": np.asfortranarray,
}


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_one_inf_or_nan_anywhere_is_found(dtype, bad, layout):
    a = np.random.default_rng(0).standard_normal((6, 7, DOT_FROM // 16)).astype(dtype)
    view = LAYOUTS[layout]
    assert not not_finite_on_cpu(view(a))
    for index in [(1, 0, 0), (5, 6, -1), (3, 2, 1), (4, 5, 9999)]:
        b = a.copy()
        b[index] = bad
        expected = not bool(np.isfinite(view(b)).all())  # the strided view skips odd rows
        assert not_finite_on_cpu(view(b)) == expected, (index, layout)


def test_finite_values_whose_squares_overflow_are_still_finite():
    """The dot of huge finite values overflows, that of tiny ones underflows; the exact test
    then decides, silently even where numpy is told to raise (as one does chasing a
    diverging run)."""
    huge = np.full(DOT_FROM, 1e20, dtype=np.float32)
    with np.errstate(all="raise"):
        assert all_finite(huge, DOT_FROM)
        huge[-1] = np.inf
        assert not all_finite(huge, DOT_FROM)
        for tiny in (np.full(DOT_FROM, 1e-30, np.float32), np.full(DOT_FROM, 1e-200)):
            assert all_finite(tiny, DOT_FROM)  # its squares underflow
    assert all_finite(np.zeros(0, dtype=np.float32))
    assert all_finite(np.float32(3.0)) and not all_finite(np.float64(np.nan))  # 0-d
    assert all_finite(np.arange(5))  # integers: never inf or NaN
