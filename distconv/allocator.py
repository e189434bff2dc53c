"""Keep freed memory in the process: a training step reuses it, so giving it back costs faults.

A training step allocates the same arrays every step (columns, activations, gradients) and frees
them again. With glibc's defaults, freed memory at the top of the heap above a threshold is
handed back to the kernel, and arrays above another threshold are ``mmap``-ed and unmapped on
every free. The next step then touches fresh pages, and every page is a fault, which costs
microseconds on a virtual machine (the figures are in docs/benchmarks.md); PyTorch's step
takes none. :func:`keep_freed_memory` raises both thresholds, as
``MALLOC_TRIM_THRESHOLD_`` and ``MALLOC_MMAP_THRESHOLD_`` would, so the pages stay mapped and the
next step reuses them. The cost is that a process keeps its peak memory mapped instead of
returning freed memory between steps (each allocator arena keeps up to
:data:`TRIM_THRESHOLD` at its top, and holes below it stay as glibc leaves them).

``distconv train``, :func:`distconv.distributed.init` and a parameter-server shard call it;
set ``DISTCONV_KEEP_MEMORY=0`` to leave the allocator alone. It also stays alone when the user
tuned it already (a ``MALLOC_*_`` variable or a ``glibc.malloc`` tunable), and elsewhere than
glibc.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
from collections.abc import Mapping

from distconv.runtime import RuntimeConfigError

log = logging.getLogger(__name__)

#: glibc's ``mallopt`` parameters (``malloc.h``)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
#: freed memory at the top of the heap kept in the process, at most (bytes)
TRIM_THRESHOLD = 1 << 30
#: extra heap grown at once, so a step's first allocations do not grow it page by page
TOP_PAD = 64 << 20
#: arrays up to this size come from the heap, not from their own ``mmap``; glibc's ceiling on
#: 64-bit systems (larger values are refused), and above every column chunk the kernels make
MMAP_THRESHOLD = 32 << 20

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed memory mapped (once per process).

    Returns:
        Whether the allocator now keeps freed memory: False off glibc, when
        ``DISTCONV_KEEP_MEMORY=0``, or when the environment tunes malloc already.

    Raises:
        RuntimeConfigError: ``DISTCONV_KEEP_MEMORY`` is set to something other than 0 or 1.
    """
    global _applied
    if _applied is not None:
        return _applied
    wanted = os.environ.get("DISTCONV_KEEP_MEMORY", "1")
    if wanted not in ("0", "1"):
        raise RuntimeConfigError(f"DISTCONV_KEEP_MEMORY must be 0 or 1, got {wanted!r}")
    _applied = wanted == "1" and not _tuned_by_user(os.environ) and _set_glibc_thresholds()
    return _applied


def keeps_freed_memory() -> bool:
    """Whether :func:`keep_freed_memory` took effect in this process: large temporaries then
    come from the heap, already mapped, instead of fresh pages every call."""
    return bool(_applied)


def _tuned_by_user(environ: Mapping[str, str]) -> bool:
    """Whether the environment sets malloc's knobs itself (ours would override them)."""
    return any(name.startswith("MALLOC_") and name.endswith("_") for name in environ) or (
        "glibc.malloc." in environ.get("GLIBC_TUNABLES", "")
    )


def _set_glibc_thresholds() -> bool:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)  # the C library this process already runs on
    settings = (
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        (M_TOP_PAD, TOP_PAD),
    )
    for param, value in settings:
        if libc.mallopt(ctypes.c_int(param), ctypes.c_int(value)) != 1:
            log.warning("mallopt(%d, %d) refused: freed memory goes back to the OS", param, value)
            return False
    return True
