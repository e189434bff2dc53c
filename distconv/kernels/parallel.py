"""Run a kernel over chunks of the batch on several threads, one BLAS thread each.

A numpy convolution spends much of its time copying pixels into columns, which numpy does on
one thread. Splitting the batch into chunks and running each chunk's copy and matrix product on
its own thread (numpy releases the GIL for both) with BLAS held to one thread per chunk uses
every core for the copies too. This is how the conv kernels reach PyTorch's speed on the CPU.
Large matrix products outside the conv kernels (fully connected layers) split their rows over
the same threads (:func:`matmul`), so one pool of threads does all of a step's work.

On the GPU (cupy arrays) the whole batch is one chunk: the device is already parallel.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

import numpy as np

from distconv.backend import is_gpu_array
from distconv.cores import processes_on_this_host, usable_cores
from distconv.notes import add_note
from distconv.placement import INTEGER_TEXT

log = logging.getLogger(__name__)

A = TypeVar("A")
B = TypeVar("B")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_blas: list | None = None
_blas_found_at = -1  # len(sys.modules) when _blas was found
#: the process-wide BLAS hold: how many callers are inside it, and what it changed
_hold_lock = threading.Lock()
_holders = 0
_held: list = []
_warned = False

#: below this many column elements per thread, threads cost more than they save: the GIL
#: hand-offs of many small numpy calls outweigh the parallel copies. The measurements behind
#: this module's constants: docs/benchmarks.md, "Why the constants are what they are"
MIN_WORK_PER_THREAD = 1 << 20
#: column elements per chunk: small enough that a chunk's columns stay in cache while the
#: matrix product reads them
CHUNK_WORK = 1 << 21


def num_threads() -> int:
    """Threads for batch-parallel kernels: ``DISTCONV_NUM_THREADS``, or the usable cores (this
    process's affinity mask, capped by a container's CPU quota) shared among the job's
    processes on this host, as its launcher says (``mpiexec -n 2`` on two cores: one each; see
    :mod:`distconv.cores`)."""
    env = os.environ.get("DISTCONV_NUM_THREADS")
    if env:
        # int() also reads "1_0" as 10 and other scripts' digits: held to the rank variables' rule
        n = int(env) if INTEGER_TEXT.fullmatch(env) else 0
        if n < 1:
            raise ValueError(f"DISTCONV_NUM_THREADS must be an integer >= 1, got {env!r}")
        return n
    # a launcher that bound each process to its own cores narrowed the mask already: dividing
    # again gives fewer threads than cores, never more (distconv-launch has Open MPI bind none)
    return max(1, usable_cores() // processes_on_this_host())


def _executor(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < n:
            # the smaller pool is dropped, not shut down: another thread (ranks run as
            # threads) may hold it between this call and its submit, which a shut-down pool
            # refuses ("cannot schedule new futures after shutdown"); its workers end once
            # it is idle and unreferenced (the executor wakes them when it is collected)
            _pool = ThreadPoolExecutor(
                max_workers=n, thread_name_prefix="distconv-kernel", initializer=_hold_worker
            )
            _pool_size = n
        return _pool


def blas_libraries() -> list:
    """The BLAS libraries loaded in this process (threadpoolctl's controllers), found again
    whenever modules were imported since: scipy or torch, imported after the first kernel
    call, bring a BLAS of their own, which would otherwise run unheld beside our threads."""
    global _blas, _blas_found_at
    # read without the lock first, the count before the list: the locked path sets the list
    # first, so a count that matches was set after its list (every hold asks, many a step)
    found_at, libs = _blas_found_at, _blas
    if libs is not None and found_at == len(sys.modules):
        return libs
    with _lock:
        if _blas is None or len(sys.modules) != _blas_found_at:
            modules = len(sys.modules)
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:  # pragma: no cover - threadpoolctl is a dependency
                _blas = []
            else:
                _blas = ThreadpoolController().select(user_api="blas").lib_controllers
            _blas_found_at = modules
        return _blas


def _per_thread(lib: Any) -> bool:
    """Whether ``lib``'s thread count is per calling thread (OpenMP layers, MKL)."""
    return getattr(lib, "threading_layer", None) == "openmp" or lib.internal_api == "mkl"


#: ``.holds``: a one-element list, how many :func:`one_blas_thread` holds the calling thread has
#: open. Only the first in takes part in the process-wide hold and only the last out (the count
#: back at 0) leaves it: a hold inside another (every kernel's, inside a Network's forward or
#: backward) leaves the hold's lock alone. The count, not the hold object, says when: holds on
#: one thread may end out of order (two generators each holding across a yield), and a hold
#: left on another thread counts down the list of the thread that took it
_depth = threading.local()
#: the libraries :func:`blas_libraries` last found, and of them those whose count is per
#: thread and those whose count is process-wide, sorted once for every hold
_kinds: tuple[list, list, list] = ([], [], [])


def _libraries_by_kind() -> tuple[list, list]:
    """:func:`blas_libraries` split into per-thread and process-wide ones (sorted again
    whenever they are found again)."""
    global _kinds
    libs = blas_libraries()
    kinds = _kinds
    if kinds[0] is not libs:
        per_thread = [lib for lib in libs if _per_thread(lib)]
        kinds = _kinds = (libs, per_thread, [lib for lib in libs if not _per_thread(lib)])
    return kinds[1], kinds[2]


class _BlasHold:
    """:func:`one_blas_thread`'s hold: a class rather than a generator context manager, and
    the process-wide part taken by a thread's first hold in and left by its last out (a step
    enters about 26, at 4 µs each before)."""

    __slots__ = ("_mine", "_count")

    def __enter__(self) -> None:
        global _holders, _held
        per_thread, shared = _libraries_by_kind()
        mine = [(lib, n) for lib in per_thread if (n := lib.get_num_threads()) != 1]
        for lib, _ in mine:
            lib.set_num_threads(1)
        self._mine = mine
        count = getattr(_depth, "holds", None)
        if count is None:
            count = _depth.holds = [0]
        if count[0] == 0:  # inside one on this thread, the process-wide hold is taken already
            with _hold_lock:
                if _holders == 0:
                    _held = [(lib, n) for lib in shared if (n := lib.get_num_threads()) != 1]
                    for lib, _ in _held:
                        lib.set_num_threads(1)
                    _check_held(shared)
                _holders += 1
        count[0] += 1
        self._count = count

    def __exit__(self, *exc_info: object) -> None:
        global _holders, _held
        count = self._count  # the entering thread's, wherever this hold is left
        count[0] -= 1
        if count[0] == 0:
            with _hold_lock:
                _holders -= 1
                if _holders == 0:
                    for lib, n in _held:
                        lib.set_num_threads(n)
                        if hasattr(lib, "clear_controlling_thread"):  # the next holder may be
                            lib.clear_controlling_thread()  # another thread (threadpoolctl >= 3.2)
                    _held = []
        for lib, n in self._mine:
            lib.set_num_threads(n)


def one_blas_thread() -> _BlasHold:
    """Hold BLAS to one thread while our own threads split the work (``with one_blas_thread():``).

    Every kernel call enters it, and so does a whole :meth:`~distconv.network.Network.forward`
    and ``backward``: inside a step distconv's kernel threads are the only parallelism. A BLAS
    pool of its own would compete with them for the cores, and OpenBLAS's workers spin for
    a while after each threaded call (the MNIST-size step took about a quarter less time with
    them held; see docs/benchmarks.md).

    A process-wide pool (OpenBLAS on pthreads) gets one hold for the whole process: the first
    caller in sets it to one thread, the last one out restores it, so kernels called from
    several Python threads at once (ranks run as threads) neither undo each other nor run
    unheld. A per-thread count (OpenMP layers, MKL) is set for the calling thread, and for good
    in our pool's workers (:func:`_hold_worker`). Counts are read and set directly:
    threadpoolctl's ``limit`` costs several times as much, and every kernel call enters here.
    A hold inside another on the same thread checks the per-thread counts again (a library
    found since, a count changed inside) and leaves the process-wide hold to the thread's
    first hold in, which keeps it until the thread's last hold is out, in whatever order.
    """
    return _BlasHold()


def _check_held(libs: list) -> None:
    """Warn once if a library kept more than one thread (threadpoolctl let another thread
    control it): results then depend on BLAS's thread count."""
    global _warned
    stuck = [lib.internal_api for lib in libs if lib.get_num_threads() not in (1, None)]
    if stuck and not _warned:
        _warned = True
        log.warning(
            "could not hold %s to one thread in the conv kernels (another Python thread controls "
            "its thread count); results may differ from run to run",
            ", ".join(stuck),
        )


#: set in our pool's threads: a kernel called from inside a chunk runs its own chunks in line
#: (waiting on the pool from one of its own threads could wait forever)
_in_pool = threading.local()


def _hold_worker() -> None:
    """Our pool's threads only run kernels: one BLAS thread for per-thread libraries, for good."""
    _in_pool.active = True
    for lib in blas_libraries():
        if _per_thread(lib):
            lib.set_num_threads(1)


def chunk_bounds(n: int, chunks: int) -> list[tuple[int, int]]:
    """``chunks`` contiguous ``(start, stop)`` ranges covering ``range(n)``, sizes within one."""
    chunks = max(1, min(chunks, n))
    edges = [n * i // chunks for i in range(chunks + 1)]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:])]


def over_batch(
    fn: Callable[[int, int], object], n: int, work_per_sample: int, on_gpu: bool = False
) -> list[object]:
    """Call ``fn(start, stop)`` on chunks covering the batch ``range(n)``; return the results.

    ``fn`` must write only its own slice of any shared output. The chunks depend on the shapes
    alone, never on the thread count, and results come back in batch order, so sums over them
    are bitwise the same whatever ``DISTCONV_NUM_THREADS`` is. BLAS is held to one thread
    inside, for a batch of one too: called outside a network step, a single sample's kernel
    therefore runs on one core.
    """
    if n == 0:
        return []
    if on_gpu:
        return [fn(0, n)]
    # a batch of one is one chunk, which _run runs in line, BLAS held as for any other
    return _run(fn, _batch_chunks(n, work_per_sample), n * work_per_sample)


def shares_out(n: int, work_per_sample: int) -> bool:
    """Whether :func:`over_batch` would run this batch's chunks on more than one thread."""
    return n > 1 and _threads_for(len(_batch_chunks(n, work_per_sample)), n * work_per_sample) > 1


def _batch_chunks(n: int, work_per_sample: int) -> list[tuple[int, int]]:
    return chunk_bounds(n, -(-n * work_per_sample // CHUNK_WORK))


def _threads_for(chunks: int, work: int | None) -> int:
    """How many threads :func:`_run` gives ``chunks`` chunks of ``work`` elements in all (1: it
    runs them in line), outside the pool's own threads."""
    threads = min(num_threads(), chunks)
    if work is not None and work < threads * MIN_WORK_PER_THREAD:
        return 1
    return threads


def _run(
    fn: Callable[[int, int], object], bounds: list[tuple[int, int]], work: int | None = None
) -> list:
    """``fn`` over ``bounds`` in order: on the pool, unless ``work`` (elements) is too little
    to share out."""
    threads = _threads_for(len(bounds), work)
    # BLAS runs on one thread in both paths: a GEMM's bits depend on how many threads split it,
    # so the serial path must not let BLAS thread where the parallel path would not
    if threads == 1 or getattr(_in_pool, "active", False):
        with one_blas_thread():
            return [fn(a, b) for a, b in bounds]
    with one_blas_thread():
        futures = [_executor(threads).submit(fn, a, b) for a, b in bounds]
        try:
            return [f.result() for f in futures]
        except BaseException:  # a chunk failed, or an interrupt came while waiting
            for f in futures:
                f.cancel()  # chunks not started yet need not start
            # the others finish inside the BLAS hold, before the caller moves on (and maybe
            # reuses the buffers they write): all of them, through another Ctrl-C too
            _settle(*futures)
            raise


def side_by_side(first: Callable[[], A], second: Callable[[], B]) -> tuple[A, B]:
    """``(first(), second())``, with ``second`` on a kernel thread while ``first`` runs here.

    For two independent kernels that are each too small to split over the threads (a
    convolution's input and weight gradients on small images): together they keep two cores
    busy where each alone keeps one. Each runs exactly as it would alone, so the results are
    bitwise the same either way. In line with one thread, or inside a kernel thread (a nested
    call must not wait on its own pool). ``first`` runs on the caller's thread, awake already:
    give it the longer kernel, so the other's wake-up hides under it.
    """
    if num_threads() < 2 or getattr(_in_pool, "active", False):
        return first(), second()
    with one_blas_thread():
        future = _executor(num_threads()).submit(second)
        try:
            result = first()
        except BaseException as error:
            future.cancel()  # no use starting it now
            _settle(future)  # nothing of this call runs on after it has failed
            other = None if future.cancelled() else future.exception()
            if other is not None:
                add_note(error, f"the kernel beside it failed too: {other!r}")
            raise
        if future.cancel():  # not started yet (the pool is busy): run it here instead
            return result, second()
        _settle(future)
        return result, future.result()


def _settle(*futures: Future) -> None:
    """Wait until every one of ``futures`` is done, through an interrupt too (raised once all
    are done): a kernel that ran on after its caller had left would leave the BLAS hold after
    it, and its restore of BLAS's thread count would not be the one that counts."""
    interrupted: BaseException | None = None
    while not all(f.done() for f in futures):
        try:
            wait(futures)
        except BaseException as error:  # a Ctrl-C: the kernel ends within milliseconds
            interrupted = error
    if interrupted is not None:
        raise interrupted


#: multiply-adds per chunk of a split matrix product. Each chunk's call packs all of ``b``
#: again, so chunks must be large (LeNet's fc1 at 28x28 ran slower split than whole)
MATMUL_CHUNK_MACS = 1 << 25
#: and at least this many rows per chunk
MATMUL_MIN_ROWS = 64


def matmul(a: Any, b: Any) -> Any:
    """``a @ b`` for matrices, its rows split over the kernel threads, BLAS on one thread each.

    How a product is split into chunks depends on its shape alone, so the result is bitwise
    the same for any ``DISTCONV_NUM_THREADS`` (OpenBLAS's own threading, and even how many
    rows one call gets, change the last bits). Fully connected layers use it so that their
    products share the cores with the conv kernels instead of waking a BLAS pool of their own.
    On the GPU it is ``a @ b``.
    """
    m, k = a.shape
    n = b.shape[1]
    if is_gpu_array(a) or m == 0:
        return a @ b
    chunks = min(-(-m * k * n // MATMUL_CHUNK_MACS), m // MATMUL_MIN_ROWS)
    bounds = chunk_bounds(m, max(1, chunks))
    if len(bounds) == 1:
        with one_blas_thread():
            return a @ b
    # the type a @ b gives, which is not always result_type's: ml_dtypes' bfloat16 products
    # come out float32, and a split product written into bfloat16 rounded every element
    out = np.empty((m, n), dtype=np.matmul(a[:0], b[:, :0]).dtype)

    def rows(start: int, stop: int) -> None:
        _product(a[start:stop], b, out[start:stop])

    _run(rows, bounds)
    return out


def _product(a: Any, b: Any, out: Any) -> None:
    """One chunk's product (a seam the tests watch)."""
    np.matmul(a, b, out=out)
