"""``c = a @ b + beta * c`` on strided views, straight through the process's own BLAS.

numpy's ``matmul`` has no ``beta``: a sum of products needs a temporary and an add per term,
and it copies an operand whose rows are not where it expects them. The shifted convolution
(:mod:`distconv.kernels.conv_shifted`) adds nine products into one output, each reading a
window of a padded image whose rows are a plane apart; BLAS's ``gemm`` does exactly that with
``beta = 1`` and a leading dimension, at no extra pass over memory.

The BLAS is the one numpy already loaded (found by threadpoolctl), called through ctypes, which
releases the GIL for the call, so the kernel threads run their products in parallel. Only
OpenBLAS is bound (numpy's wheels ship it; its configuration string says whether its integers
are 64-bit); elsewhere :func:`available` is False and callers keep their numpy path.
"""

from __future__ import annotations

import ctypes
import functools
import logging
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_CTYPES = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


@functools.cache
def _gemm(dtype: np.dtype) -> Any:
    """The ctypes ``cblas_?gemm`` for ``dtype`` (float32/float64), or None if there is none."""
    if dtype not in _CTYPES:
        return None
    try:
        from threadpoolctl import ThreadpoolController

        libs = ThreadpoolController().select(internal_api="openblas").lib_controllers
    except Exception:  # pragma: no cover - threadpoolctl is a dependency
        return None
    letter = "s" if dtype == np.float32 else "d"
    for lib in libs:
        found = _bind(lib, letter, _CTYPES[dtype])
        if found is not None:
            return found
    return None


def _bind(lib: Any, letter: str, real: Any) -> Any:
    """``cblas_<letter>gemm`` of one OpenBLAS, with its integer width, or None."""
    dll = ctypes.CDLL(lib.filepath)
    config = getattr(lib, "get_config", lambda: None)()
    config = "" if config is None else str(config)
    prefix = getattr(lib, "prefix", "").removeprefix("lib").removesuffix("openblas")
    for name in (f"{prefix}cblas_{letter}gemm64_", f"cblas_{letter}gemm64_", f"cblas_{letter}gemm"):
        fn = getattr(dll, name, None)
        if fn is None:
            continue
        wide = name.endswith("64_") or "USE64BITINT" in config
        index = ctypes.c_int64 if wide else ctypes.c_int32
        enum, ptr = ctypes.c_int, ctypes.c_void_p
        fn.argtypes = [enum, enum, enum, index, index, index, real, ptr, index, ptr, index]
        fn.argtypes += [real, ptr, index]
        fn.restype = None
        return fn
    return None


def available(dtype: Any) -> bool:
    """Whether :func:`gemm` can run on arrays of ``dtype``."""
    return _gemm(np.dtype(dtype)) is not None


def _layout(m: Any) -> tuple[int, int] | None:
    """``(trans flag, leading dimension)`` of a 2-D view BLAS can read in place, else None."""
    item = m.itemsize
    rows, cols = m.shape
    # a length-1 axis may carry any stride: give it the one a contiguous array would have
    r = m.strides[0] if rows > 1 else cols * item
    c = m.strides[1] if cols > 1 else item
    if c == item and r % item == 0 and r // item >= max(1, cols):
        return _NO_TRANS, r // item
    r = m.strides[0] if rows > 1 else item
    c = m.strides[1] if cols > 1 else rows * item
    if r == item and c % item == 0 and c // item >= max(1, rows):
        return _TRANS, c // item
    return None


def gemm(a: Any, b: Any, c: Any, beta: float) -> None:
    """``c[...] = a @ b + beta * c`` in place, for 2-D numpy views of one float dtype.

    ``a`` and ``b`` may be transposed views and their rows may lie any distance apart (a
    window of a larger array); ``c`` must have unit stride along its rows. With ``beta = 0``
    whatever ``c`` held is ignored (BLAS does not read it).

    Raises:
        ValueError: shapes that do not chain, mixed dtypes, or a view BLAS cannot read in place.
    """
    fn = _gemm(np.dtype(c.dtype))
    (m, k), (k2, n) = a.shape, b.shape
    if fn is None or a.dtype != c.dtype or b.dtype != c.dtype:
        raise ValueError(f"no BLAS gemm for {a.dtype} @ {b.dtype} -> {c.dtype}")
    if k != k2 or c.shape != (m, n):
        raise ValueError(f"gemm shapes do not chain: {a.shape} @ {b.shape} -> {c.shape}")
    la, lb, lc = _layout(a), _layout(b), _layout(c)
    if la is None or lb is None or lc is None or lc[0] != _NO_TRANS or not c.flags.writeable:
        raise ValueError("gemm needs views with one unit stride (and a writable, row-major c)")
    if m == 0 or n == 0:
        return
    if k == 0:
        c *= beta
        return
    fn(
        _ROW_MAJOR, la[0], lb[0], m, n, k,
        1.0, a.ctypes.data, la[1], b.ctypes.data, lb[1],
        beta, c.ctypes.data, lc[1],
    )  # fmt: skip
