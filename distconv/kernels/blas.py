"""``c = a @ b + beta * c`` on strided views, straight through the process's own BLAS.

numpy's ``matmul`` has no ``beta``: a sum of products needs a temporary and an add per term,
and it copies an operand whose rows are not where it expects them. The shifted convolution
(:mod:`distconv.kernels.conv_shifted`) adds nine products into one output, each reading a
window of a padded image whose rows are a plane apart; BLAS's ``gemm`` does exactly that with
``beta = 1`` and a leading dimension, at no extra pass over memory.

The BLAS is the one numpy already loaded (found by threadpoolctl, in the list the kernel
threads' hold uses), called through ctypes, which releases the GIL for the call, so the
kernel threads run their products in parallel. Only
OpenBLAS is bound (numpy's wheels ship it; its configuration string says whether its integers
are 64-bit); elsewhere :func:`available` is False and callers keep their numpy path.

The same library, described (:func:`numpy_blas`, :func:`kernels_said`), is what a metrics log's
run line, ``distconv train``'s start and the benchmarks' headers name: float32 results change
in their last bits with it, and its kernels set a convolution's speed.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from distconv.kernels.parallel import blas_libraries

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_CTYPES = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


@functools.cache
def _gemm(dtype: np.dtype) -> Any:
    """The ctypes ``cblas_?gemm`` for ``dtype`` (float32/float64), or None if there is none."""
    if dtype not in _CTYPES:
        return None
    libs = [lib for lib in numpy_first(blas_libraries()) if lib.internal_api == "openblas"]
    letter = "s" if dtype == np.float32 else "d"
    for lib in libs:
        found = _bind(lib, letter, _CTYPES[dtype])
        if found is not None:
            return found
    return None


def numpy_first(libs: list) -> list:
    """``libs`` (threadpoolctl's controllers) with numpy's own first, in their order otherwise:
    scipy or torch may have loaded another BLAS before numpy's (in numpy/.dylibs or
    numpy.libs/, both under numpy's prefix)."""
    numpy_dir = str(Path(np.__file__).parent)
    return sorted(libs, key=lambda lib: not str(lib.filepath).startswith(numpy_dir))


#: symbol (prefix, suffix) pairs OpenBLAS builds use: numpy's wheels, 64-bit-integer builds
#: with the usual suffix, plain builds
_NAMINGS = (("scipy_", "64_"), ("scipy_", ""), ("", "64_"), ("", ""))


def _bind(lib: Any, letter: str, real: Any) -> Any:
    """``cblas_<letter>gemm`` of one OpenBLAS, with its integer width, or None.

    The width comes from the library's own configuration string (``USE64BITINT``): passing
    32-bit integers to a 64-bit build would hand BLAS garbage sizes.
    """
    dll = ctypes.CDLL(lib.filepath)
    for prefix, suffix in _NAMINGS:
        fn = getattr(dll, f"{prefix}cblas_{letter}gemm{suffix}", None)
        config = getattr(dll, f"{prefix}openblas_get_config{suffix}", None)
        if fn is None or config is None:
            continue
        config.restype = ctypes.c_char_p
        wide = b"USE64BITINT" in (config() or b"")
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


def readable(m: Any) -> bool:
    """Whether :func:`gemm` reads the 2-D view ``m`` in place (as ``a`` or ``b``)."""
    return _layout(m) is not None


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
    if np.may_share_memory(c, a) or np.may_share_memory(c, b):
        raise ValueError("gemm's output overlaps an operand")
    if m == 0 or n == 0 or k == 0:  # nothing for BLAS to read
        c[...] = 0 if beta == 0 else c * beta
        return
    la, lb, lc = _layout(a), _layout(b), _layout(c)
    if la is None or lb is None or lc is None or lc[0] != _NO_TRANS or not c.flags.writeable:
        raise ValueError("gemm needs views with one unit stride (and a writable, row-major c)")
    fn(
        _ROW_MAJOR, la[0], lb[0], m, n, k,
        1.0, a.ctypes.data, la[1], b.ctypes.data, lb[1],
        beta, c.ctypes.data, lc[1],
    )  # fmt: skip


@functools.cache
def numpy_blas() -> str | None:
    """The BLAS numpy's matrix products run on, as threadpoolctl reads its library:
    ``"openblas 0.3.31.188.0 Haswell pthreads"`` (name, version, the CPU kernels the library
    picked at load, its threading layer; each only where known). The kernels matter as much
    as the version: OpenBLAS picks them by the CPU, and another CPU's sum their own way.
    numpy's own library (:func:`numpy_first`), as :func:`gemm` binds it; None where no BLAS is
    found. Read once: the kernels are picked when the library loads."""
    libs = numpy_first(blas_libraries())
    if not libs:
        return None
    lib = libs[0]
    parts = (lib.internal_api, lib.version, getattr(lib, "architecture", None))
    parts += (getattr(lib, "threading_layer", None),)
    return " ".join(str(part) for part in parts if part)


#: the variables that hold OpenBLAS to kernels other than its CPU's own (``CORETYPE`` names
#: them) or size them for another cache (``L2_SIZE``); some machines set them for old OpenBLAS
#: builds, which holds a current numpy to older, slower kernels (on a Zen 5 CPU, one of LeNet's
#: products in single-thread ``sgemm``, 288x1024 by 1024x64, ran at 123 GFLOP/s on the Haswell
#: kernels against 222 on its own: docs/benchmarks-history.md, "This stop: a faster machine")
KERNEL_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def kernel_vars_set(blas: str | None, environ: Mapping[str, str]) -> list[str]:
    """Which of :data:`KERNEL_VARS` ``environ`` sets (not blank: OpenBLAS's default) for the
    BLAS ``blas`` describes (as :func:`numpy_blas` does): none where that is not OpenBLAS (MKL,
    Accelerate, or no BLAS found), which reads none of them."""
    if not blas or blas.split()[0] != "openblas":
        return []
    return [name for name in KERNEL_VARS if environ.get(name)]


def kernels_forced(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``environ`` (this process's by default) names numpy's OpenBLAS's kernels itself
    (``OPENBLAS_CORETYPE``), rather than leaving them to the CPU. ``OPENBLAS_L2_SIZE`` alone
    does not, nor a blank ``OPENBLAS_CORETYPE``, nor either beside a numpy on another BLAS
    (:func:`kernel_vars_set`)."""
    env = os.environ if environ is None else environ
    if not env.get("OPENBLAS_CORETYPE"):  # the usual case, without reading the libraries
        return False
    return "OPENBLAS_CORETYPE" in kernel_vars_set(numpy_blas(), env)


def kernels_said(environ: Mapping[str, str] | None = None) -> str:
    """numpy's BLAS and its kernels in one line (:func:`blas_said` of :func:`numpy_blas` and
    ``environ``, this process's by default): what the benchmarks' headers say, and ``distconv
    train``'s start where :func:`kernels_forced`."""
    return blas_said(numpy_blas(), os.environ if environ is None else environ)


def blas_said(blas: str | None, environ: Mapping[str, str]) -> str:
    """``blas`` (as :func:`numpy_blas` describes a library) in one line: ``numpy's BLAS:
    openblas 0.3.31.188.0 Haswell pthreads``, followed, where ``environ`` sets any of
    :data:`KERNEL_VARS` for it (:func:`kernel_vars_set`), by which and the command that runs
    the CPU's own kernels: `` (set by the environment: OPENBLAS_CORETYPE=Haswell; for the
    CPU's own kernels, run under env -u OPENBLAS_CORETYPE)``."""
    said = f"numpy's BLAS: {blas or 'none found'}"
    names = kernel_vars_set(blas, environ)
    if not names:
        return said
    forced = " ".join(f"{name}={environ[name]}" for name in names)
    unset = " ".join(f"-u {name}" for name in names)
    own = f"for the CPU's own kernels, run under env {unset}"
    return f"{said} (set by the environment: {forced}; {own})"
