"""What dtype a bucket's gradients travel in over MPI: the names ``grad_dtype`` takes, which
wires are reduced by hand (the 16-bit floats, which MPI's SUM cannot add), the check that such a
wire came back finite, and how much wider than the gradients a wire buffer may be. MPISync
reads its ``grad_dtype`` here; the buckets (:mod:`distconv.sync.mpi.buckets`) and the layout
that sizes them read the rest."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from distconv.backend import all_finite, resolve_dtype
from distconv.parameter import Parameter


def summed_by_hand(dtype: np.dtype) -> bool:
    """Whether a wire of ``dtype`` is reduced by hand, in float32: the 16-bit floats (float16,
    bfloat16), which MPI's built-in SUM cannot add. float32, float64 and long double
    (``MPI_LONG_DOUBLE``) are MPI's own: summing a long double by hand in float32 rounded its
    sums to float32's 24 bits without a word."""
    return dtype.itemsize <= 2


#: what ``grad_dtype`` may name
WIRE_DTYPES = ("float16", "bfloat16", "float32", "float64")


def wire_dtype(name: str | None) -> np.dtype | None:
    """The numpy dtype for ``grad_dtype`` (None: the gradients' own).

    Raises:
        ValueError: an unknown name, or bfloat16 without ``ml_dtypes``.
    """
    if name is None:
        return None
    if name not in WIRE_DTYPES:
        raise ValueError(f"grad_dtype must be one of {WIRE_DTYPES} or None, got {name!r}")
    return resolve_dtype(name)


def finite_16(wire: np.ndarray, scratch: np.ndarray) -> bool:
    """Whether ``wire``, reduced by hand (:func:`summed_by_hand`), holds no NaN or infinity.

    A 16-bit float's bits, sign cleared, order as the magnitude, NaN and infinity last: one
    integer pass into ``scratch`` (as many bytes as ``wire``) and a max, not ``isfinite`` (2 ms
    a 4 MiB float16 bucket). A 1-byte float (a gradient's own float8) has no 16-bit view, and
    its NaN may be a negative zero's bits (``float8_e4m3fnuz``'s 0x80): ``isfinite`` decides."""
    if wire.dtype.itemsize != 2:
        return all_finite(wire)
    bits = np.bitwise_and(wire.view(np.uint16), 0x7FFF, out=scratch.view(np.uint16)[: wire.size])
    return int(bits.max(initial=0)) < int(np.array(np.inf, wire.dtype).view(np.uint16))


def widening(params: Sequence[Parameter], wire: np.dtype | None) -> float:
    """How many times its gradients' bytes a bucket's wire buffer holds at most (at least 1):
    a wire dtype wider than the gradients (float64 over float32, float32 over float16)."""
    if wire is None:
        return 1.0
    return max([1.0, *(wire.itemsize / p.grad.itemsize for p in params)])
