"""The 16-bit wire's check (:func:`~distconv.sync.mpi.wire_dtypes.finite_16`) reads the wire's bits:
its verdict equals ``isfinite`` for every one of the 65,536 patterns of float16 and bfloat16
(infinities, NaNs of every payload and sign, the largest finite values, subnormals, negative
zero), and a step on a wire of each finite class trains with and without the thread."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.sync.mpi.wire_dtypes import finite_16
from tests.mpi.test_wire_overflow import START, one_step

PATTERNS = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def wire_dtype(name: str) -> np.dtype:
    """float16, or bfloat16 (skipped without ml_dtypes)."""
    if name == "bfloat16":
        return np.dtype(
            pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes").bfloat16
        )
    return np.dtype(np.float16)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_every_bit_pattern_gets_isfinites_verdict(name):
    dtype = wire_dtype(name)
    values = PATTERNS.view(dtype)
    expected = np.isfinite(values.astype(np.float32))
    scratch = np.empty(4, dtype)  # longer than the wire, as a padded bucket's
    verdicts = [finite_16(values[k : k + 1], scratch) for k in range(values.size)]
    assert (np.array(verdicts) == expected).all(), np.flatnonzero(verdicts != expected)[:8]
    finite = values[expected]
    assert finite_16(finite, np.empty(finite.size, dtype))  # all of them at once
    mixed = finite.copy()
    for bad in values[~expected][::97]:  # one non-finite value among the finite ones
        mixed[-1] = bad
        assert not finite_16(mixed, np.empty(mixed.size, dtype))
    assert finite_16(values[:0], scratch)  # an empty wire holds nothing non-finite


@pytest.mark.timeout(60)
@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize(
    "name, tiny",
    [("float16", 2.0**-24), ("bfloat16", 2.0**-133)],  # each wire's smallest subnormal
)
def test_subnormals_and_negative_zero_pass_the_wire(name, tiny, overlap):
    wire_dtype(name)
    grad = np.array([tiny, -0.0, -tiny])
    value = one_step(name, grad, overlap).value
    np.testing.assert_array_equal(value, START - 0.01 * grad)  # carried exactly, none refused
