"""Finiteness checks that send a convolution to its exact route.

The fast routes multiply or sum zeros that stand for no pixel pair (wide columns, shifted
taps, the dense matrix); an inf or NaN that meets them comes out as NaN where the exact sum
never reaches. Rare, so the fast routes stay the default and a check picks the exact one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distconv.backend import all_finite, is_gpu_array

#: elements from which the check takes a dot product (:func:`distconv.backend.all_finite`):
#: outside the kernels' one-BLAS-thread sections BLAS may wake its threads for it, which costs
#: more than ``isfinite`` saves below about this size (measured: 14 against 10 us at 64 Ki
#: float32, 36 against 45 us at 256 Ki, 0.2 against 0.28 ms at 1.6 M)
DOT_FROM = 1 << 18


def exact_if_not_finite(dw: Any, junk: bool, exact: Callable[[], Any]) -> Any:
    """``dw``, or ``exact()`` (the same gradient from exact columns) where ``junk`` columns
    may have met a non-finite value.

    Wide columns and shifted taps read past each row's end, values that meet the zeros the
    other side was widened with: an inf or NaN there comes out as NaN in taps the exact sum
    never reaches. Rare, so checked after the fact (zeroing the junk on every call cost most
    of what the wide layout saves): one pass over ``dw`` each call, and a second weight
    gradient whenever it is not finite. On a GPU without cuDNN the check waits for the device.
    """
    if junk and not all_finite(dw, DOT_FROM):
        return exact()
    return dw


def not_finite_on_cpu(a: Any) -> bool:
    """Whether ``a``, a CPU array, holds an inf or NaN (GPU arrays pass: checking would wait
    for the device)."""
    return not is_gpu_array(a) and not all_finite(a, DOT_FROM)
