"""Batch chunks on threads: BLAS is held to one thread inside, and given its count back after;
the kernel threads' pool, grown by one Python thread while another hands it work, still runs
that work."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
import pytest
from threadpoolctl import ThreadpoolController, threadpool_limits

from distconv.kernels import parallel
from distconv.kernels.parallel import chunk_bounds, matmul, over_batch, shares_out, side_by_side
from distconv.notes import notes_of


def _blas_threads() -> list[int]:
    return [
        lib.num_threads for lib in ThreadpoolController().select(user_api="blas").lib_controllers
    ]


@pytest.mark.parametrize("work", [1, 1 << 22])  # the serial path and the threaded one
def test_blas_runs_on_one_thread_inside_and_is_restored(work, monkeypatch):
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")  # the threaded path even on one core
    with threadpool_limits(limits=2, user_api="blas"):
        seen = over_batch(lambda a, b: _blas_threads(), 4, work)
        after = _blas_threads()
    assert all(threads == [1] * len(after) for threads in seen)
    assert after == [2] * len(after)


def test_chunks_cover_the_batch_in_order():
    assert chunk_bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert chunk_bounds(2, 5) == [(0, 1), (1, 2)]


def test_kernels_on_several_python_threads_all_run_held():
    """Ranks run as threads: each one's kernels hold BLAS to one thread, even while another
    thread enters and leaves (the hold is process-wide, not undone by the first to leave)."""
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")
    inside, may_leave = threading.Event(), threading.Event()
    seen: dict[str, list] = {}

    def long_kernel(a, b):
        inside.set()
        may_leave.wait(10)  # rank b enters and leaves meanwhile
        return _blas_threads()

    def rank_a():
        seen["a"] = over_batch(long_kernel, 2, 1)[:1]

    def rank_b():
        inside.wait(10)
        seen["b"] = over_batch(lambda a, b: _blas_threads(), 2, 1)[:1]
        may_leave.set()

    with threadpool_limits(limits=2, user_api="blas"):
        over_batch(lambda a, b: None, 2, 1)  # the main thread holds and releases first
        threads = [threading.Thread(target=rank_a), threading.Thread(target=rank_b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        after = _blas_threads()
    ones = [1] * len(after)
    assert seen == {"a": [ones], "b": [ones]}
    assert after == [2] * len(after)


@pytest.mark.parametrize("shape", [(64, 3136, 128), (128, 64, 3136), (37, 1000, 77), (5, 50, 7)])
def test_matmul_is_the_product_and_bitwise_the_same_for_any_thread_count(shape, monkeypatch):
    """Rows split by shape alone: 1, 2 and 3 threads give the same bits, close to ``a @ b``."""
    m, k, n = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32).T  # a transposed view, as the fc uses
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
        results.append(matmul(a, b))
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(results[0], want, rtol=1e-4, atol=1e-3 * np.sqrt(k))
    assert results[0].dtype == np.float32
    for other in results[1:]:
        assert np.array_equal(other, results[0])


def test_matmul_splits_large_products_over_threads(monkeypatch):
    """A product of several chunks runs its chunks on the pool, each with BLAS held to one."""
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    seen: list[tuple[str, list[int]]] = []
    real = parallel._product

    def spy(a, b, out):
        seen.append((threading.current_thread().name, _blas_threads()))
        real(a, b, out)

    monkeypatch.setattr(parallel, "_product", spy)
    a, b = np.ones((256, 1024), np.float32), np.ones((1024, 512), np.float32)
    with threadpool_limits(limits=2, user_api="blas"):
        out = matmul(a, b)
    assert np.array_equal(out, np.full((256, 512), 1024, np.float32))
    assert len(seen) == 4  # 134 M multiply-adds in chunks of 33.5 M: four of 64 rows
    assert all(name.startswith("distconv-kernel") for name, _ in seen)
    assert all(threads == [1] * len(threads) for _, threads in seen)


@pytest.mark.parametrize("kinds", ["bfloat16", "float16", "float32 float64"])
def test_a_split_matmul_comes_out_in_the_type_of_the_whole_product(kinds, monkeypatch):
    """A split product was written into ``result_type`` of its operands: bfloat16 where
    ml_dtypes' ``a @ b`` gives float32, so a fully connected layer's bfloat16 activations
    were rounded to bfloat16 from 128 rows on and kept float32 below (the same example's
    output then depended on its batch)."""
    types = [
        pytest.importorskip("ml_dtypes").bfloat16 if k == "bfloat16" else k for k in kinds.split()
    ]
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 1024)).astype(types[0])
    b = rng.standard_normal((1024, 512)).astype(types[-1])
    out, whole = matmul(a, b), a @ b  # four chunks of 64 rows, as above
    assert out.dtype == whole.dtype
    np.testing.assert_allclose(out, whole, rtol=1e-6, atol=1e-6)
    assert matmul(a[:64], b).dtype == whole.dtype  # one chunk: a @ b itself


@pytest.mark.timeout(30)
def test_side_by_side_runs_the_second_on_a_kernel_thread_at_the_same_time(monkeypatch):
    """Each waits for the other to have started: they can only both finish if they overlap."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    started = {"first": threading.Event(), "second": threading.Event()}

    def task(me: str, other: str):
        def run():
            started[me].set()
            assert started[other].wait(10), f"{me} ran alone"
            return me, threading.current_thread().name, _blas_threads()

        return run

    (a, a_thread, a_blas), (b, b_thread, b_blas) = side_by_side(
        task("first", "second"), task("second", "first")
    )
    assert (a, b) == ("first", "second")
    assert a_thread == threading.current_thread().name
    assert b_thread.startswith("distconv-kernel")
    assert a_blas == [1] * len(a_blas) and b_blas == [1] * len(b_blas)


@pytest.mark.timeout(10)
def test_side_by_side_in_line_with_one_thread(monkeypatch, pool_use):
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "1")
    order: list[str] = []
    assert side_by_side(
        lambda: order.append("first") or 1, lambda: order.append("second") or 2
    ) == (
        1,
        2,
    )
    assert order == ["first", "second"]
    assert not pool_use


@pytest.mark.timeout(10)
def test_side_by_side_inside_a_kernel_thread_runs_in_line(monkeypatch):
    """A nested call must never hand work to the pool it runs in (both workers could wait on
    each other for ever): the spy fails such a hand-off at once instead of letting it hang."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    real = parallel._executor

    def executor(n):
        if threading.current_thread().name.startswith("distconv-kernel"):
            raise AssertionError("a kernel thread handed work to its own pool")
        return real(n)

    monkeypatch.setattr(parallel, "_executor", executor)

    def pair(lo, hi):
        seen: list[tuple[str, str]] = []  # one list a chunk: the chunks run at the same time

        def note(name):
            return lambda: seen.append((name, threading.current_thread().name)) or name

        return side_by_side(note("first"), note("second")), seen

    chunks = over_batch(pair, 2, 1 << 22)  # two chunks of enough work to run on the pool
    for result, seen in chunks:
        assert result == ("first", "second")
        assert [name for name, _ in seen] == ["first", "second"]
        assert seen[0][1] == seen[1][1] and seen[0][1].startswith("distconv-kernel")


@contextmanager
def _busy_pool():
    """Every worker of the kernel pool taken until the block ends (other ranks' kernels);
    leaves the pool drained: anything queued meanwhile has run by the end."""
    pool = parallel._executor(2)
    workers = parallel._pool_size
    all_in, release = threading.Barrier(workers + 1), threading.Event()
    busy = [
        pool.submit(lambda: all_in.wait(5) is not None and release.wait(5)) for _ in range(workers)
    ]
    all_in.wait(5)  # every worker is inside one
    try:
        yield
    finally:
        release.set()
        assert all(f.result(10) for f in busy)
        drained = [pool.submit(lambda: None) for _ in range(workers)]
        for f in drained:  # first in, first out: what was queued before these has run
            f.result(10)


@pytest.mark.timeout(10)
def test_side_by_side_runs_the_second_here_when_the_pool_is_busy(monkeypatch):
    """Every kernel thread taken: the second, not started by the time the first is done, runs
    on the caller's thread instead of waiting for a worker."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    with _busy_pool():
        _, where = side_by_side(lambda: None, lambda: threading.current_thread().name)
    assert where == threading.current_thread().name


def _slow_kernel(seconds: float):
    """A kernel that takes ``seconds``, and events set when it starts and when it is done."""
    started, done = threading.Event(), threading.Event()

    def kernel():
        started.set()
        time.sleep(seconds)
        done.set()

    return kernel, started, done


@pytest.mark.timeout(10)
def test_an_interrupt_while_waiting_lets_the_second_finish_first(monkeypatch):
    """A Ctrl-C while the caller waits for the second kernel is raised only once that kernel
    is done, so it cannot run on past the BLAS hold (which then gives BLAS its count back)."""
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")
    import signal

    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    second, started, finished = _slow_kernel(0.3)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    def first():
        assert started.wait(5)
        signal.setitimer(signal.ITIMER_REAL, 0.1)  # goes off while the caller waits for second

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with threadpool_limits(limits=2, user_api="blas"):
            with pytest.raises(KeyboardInterrupt):
                side_by_side(first, second)
            assert finished.is_set()
            assert _blas_threads() == [2] * len(_blas_threads())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.timeout(30)
def test_side_by_side_waits_for_the_second_before_the_firsts_error_propagates(monkeypatch):
    """A second kernel already running is waited for; one not started yet never starts."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    second, started, done = _slow_kernel(0.2)

    def first_once_second_runs():
        assert started.wait(5)
        raise ValueError("first failed")

    with pytest.raises(ValueError, match="first failed"):
        side_by_side(first_once_second_runs, second)
    assert done.is_set()

    started.clear()
    done.clear()

    def first_at_once():
        raise ValueError("first failed")

    with _busy_pool(), pytest.raises(ValueError, match="first failed"):
        side_by_side(first_at_once, second)  # queued behind the busy pool: cancelled
    assert not started.is_set()  # the pool is drained by now: it would have run

    second_failed = threading.Event()

    def failing_second():
        second_failed.set()
        raise KeyError("second failed")

    with pytest.raises(KeyError, match="second failed"):
        side_by_side(lambda: 1, failing_second)

    def failing_first():
        assert second_failed.wait(5)
        time.sleep(0.05)  # from its set() to its raise
        raise ValueError("first failed")

    second_failed.clear()
    with pytest.raises(ValueError, match="first failed") as raised:
        side_by_side(failing_first, failing_second)
    said = notes_of(raised.value)
    assert any("second failed" in note for note in said), said


@pytest.mark.parametrize(
    "n,work,threads",
    [(64, 4608, "2"), (64, 56448, "2"), (64, 56448, "1"), (1, 1 << 22, "2"), (40, 1 << 17, "3")],
)
def test_shares_out_says_whether_over_batch_uses_the_pool(n, work, threads, monkeypatch, pool_use):
    monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
    over_batch(lambda a, b: None, n, work)
    assert shares_out(n, work) == bool(pool_use)


@pytest.mark.timeout(10)
def test_a_failed_chunk_lets_the_others_finish_before_its_error_propagates(monkeypatch):
    """over_batch raised a chunk's error while the other chunks still ran: they ran on past
    the BLAS hold, released on the way out, and into buffers the caller had given up, as
    side_by_side already refuses to let its second kernel do."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    started, finished, held = threading.Event(), threading.Event(), []

    def chunk(lo, hi):
        if lo == 0:
            assert started.wait(5)
            raise ValueError("chunk 0 failed")
        started.set()
        time.sleep(0.2)  # still running when chunk 0 fails
        held.append(parallel._holders)
        finished.set()

    with pytest.raises(ValueError, match="chunk 0 failed"):
        over_batch(chunk, 2, 1 << 22)  # two chunks of enough work to run on the pool
    assert finished.is_set()
    assert held == [1]  # inside the caller's hold to the end


@pytest.mark.timeout(10)
def test_a_ctrl_c_while_the_chunks_settle_leaves_none_running(monkeypatch):
    """The chunks were settled one by one, and an interrupt raised once the one it came in
    was done: a second Ctrl-C while the first of several running chunks settled left the
    later ones running past the BLAS hold, as one failed chunk had before."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "3")
    started, finished = threading.Barrier(3), []
    real_wait, calls = parallel.wait, []

    def interrupted_wait(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # a Ctrl-C arrives while the others settle
            raise KeyboardInterrupt
        return real_wait(*args, **kwargs)

    def chunk(lo, hi):
        started.wait(5)
        if lo == 0:
            raise ValueError("chunk 0 failed")
        time.sleep(0.2 * lo)  # still running when chunk 0 fails
        finished.append(lo)

    monkeypatch.setattr(parallel, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        over_batch(chunk, 3, 1 << 22)  # three chunks of enough work to run on the pool
    assert sorted(finished) == [1, 2] and parallel._holders == 0


@pytest.mark.timeout(30)
def test_a_kernel_called_inside_a_chunk_runs_in_line(monkeypatch):
    """Nested: a chunk that calls matmul must not wait on the pool it runs in."""
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "2")
    a, b = np.ones((256, 1024), np.float32), np.ones((1024, 512), np.float32)
    results = over_batch(lambda lo, hi: matmul(a, b)[0, 0], 4, 1 << 22)
    assert results == [1024.0] * 4


def test_network_forward_and_backward_hold_blas_to_one_thread():
    """Inside a step the kernels' threads are the only parallelism: a layer sees one BLAS
    thread in forward and backward, and the count comes back after."""
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")
    from distconv.arg import Arg
    from distconv.layers.activation import Activation
    from distconv.network import Network

    seen = []

    class Probe(Activation):
        def _forward(self, x):
            seen.append(("fwd", _blas_threads()))
            return super()._forward(x)

        def _backward(self, dz, callback):
            seen.append(("bwd", _blas_threads()))
            return super()._backward(dz, callback)

    net = Network()
    net.add("probe", Probe("relu"), "x")
    with threadpool_limits(limits=2, user_api="blas"):
        net.forward({"x": Arg(np.ones((2, 3), np.float32))})
        net.backward(lambda p: None)
        after = _blas_threads()
    assert [d for d, _ in seen] == ["fwd", "bwd"]
    assert all(threads == [1] * len(after) for _, threads in seen)
    assert after == [2] * len(after)


def test_a_blas_loaded_after_the_first_kernel_call_is_held_too():
    """scipy brings an OpenBLAS of its own; imported after the kernels first looked, it must
    still be held to one thread inside them (a fresh process: here it may be loaded already)."""
    pytest.importorskip("scipy.linalg")
    code = """
import numpy as np
from threadpoolctl import ThreadpoolController, threadpool_limits
from distconv.kernels.parallel import over_batch

def counts():
    libs = ThreadpoolController().select(user_api="blas").lib_controllers
    return sorted((lib.filepath, lib.num_threads) for lib in libs)

over_batch(lambda a, b: None, 4, 1)  # the kernels look for BLAS libraries now
import scipy.linalg  # noqa: F401, E402 - loads scipy's own OpenBLAS
with threadpool_limits(limits=2, user_api="blas"):
    inside = over_batch(lambda a, b: counts(), 4, 1)
print(len(inside[0]), all(n == 1 for _, n in inside[0]))
"""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    libraries, held = proc.stdout.split()
    if int(libraries) < 2:
        pytest.skip("scipy shares numpy's BLAS here")
    assert held == "True", proc.stdout


@pytest.mark.parametrize(
    "cores, env, expected",
    [
        (4, {}, 4),
        (4, {"MPI_LOCALNRANKS": "2"}, 2),  # mpiexec -n 2 on this host: half each
        (2, {"OMPI_COMM_WORLD_LOCAL_SIZE": "3"}, 1),  # never none
        (1, {"MPI_LOCALNRANKS": "2"}, 1),  # bound to a core of its own already
        (4, {"MPI_LOCALNRANKS": "2", "DISTCONV_NUM_THREADS": "3"}, 3),  # said outright
    ],
)
def test_kernel_threads_share_the_cores_among_the_jobs_processes_on_the_host(
    monkeypatch, cores, env, expected
):
    from distconv.cores import LOCAL_SIZE_VARS
    from distconv.kernels import parallel

    for name in (*LOCAL_SIZE_VARS, "DISTCONV_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(parallel, "usable_cores", lambda: cores)
    assert parallel.num_threads() == expected


@pytest.mark.timeout(60)
def test_a_pool_grown_by_another_thread_still_runs_the_work_handed_to_it(monkeypatch):
    """Rank A (a Python thread) gets the two-thread pool and is about to submit its chunks;
    rank B's kernel, with more chunks, grows the pool meanwhile. The pool A holds was shut
    down, and A's kernel failed: 'cannot schedule new futures after shutdown'."""
    monkeypatch.setattr(parallel, "_pool", None)
    monkeypatch.setattr(parallel, "_pool_size", 0)
    monkeypatch.setenv("DISTCONV_NUM_THREADS", "4")
    handed, grown = threading.Event(), threading.Event()

    class Pausing(ThreadPoolExecutor):
        def submit(self, *args, **kwargs):
            if threading.current_thread().name == "rank-a" and not handed.is_set():
                handed.set()  # A holds this pool now; B grows it before A submits
                assert grown.wait(20)
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(parallel, "ThreadPoolExecutor", Pausing)
    results: dict[str, object] = {}

    def rank_a() -> None:
        try:
            results["a"] = parallel._run(
                lambda a, b: (a, b, threading.current_thread().name), [(0, 1), (1, 2)]
            )
        except BaseException as error:  # noqa: BLE001 - reported below
            results["a"] = error

    thread = threading.Thread(target=rank_a, name="rank-a")
    thread.start()
    assert handed.wait(20)
    smaller = parallel._pool
    parallel._executor(4)  # rank B's kernel
    assert parallel._pool is not smaller and parallel._pool_size == 4
    grown.set()
    thread.join(20)
    got = results["a"]
    assert not isinstance(got, BaseException), got
    assert [(a, b) for a, b, _ in got] == [(0, 1), (1, 2)]
    assert all(name.startswith("distconv-kernel") for _, _, name in got)
    # the smaller pool's workers end once nothing holds it: dropped, it is no leak
    workers = set(smaller._threads)
    assert workers
    del smaller
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(t.is_alive() for t in workers):
        time.sleep(0.05)
    assert not any(t.is_alive() for t in workers)


def test_a_hold_inside_another_on_one_thread_leaves_the_process_wide_hold_to_the_outer():
    """Every kernel call holds BLAS inside the Network's hold: the inner one takes no part in
    the process-wide hold (its lock cost 4 µs a kernel call), and leaving it gives nothing back
    while the outer one still holds."""
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")
    with threadpool_limits(limits=2, user_api="blas"):
        after = _blas_threads()
        with parallel.one_blas_thread():
            with parallel.one_blas_thread():
                inner = (parallel._holders, _blas_threads())
            between = _blas_threads()
        assert _blas_threads() == after
    ones = [1] * len(after)
    assert inner == (1, ones) and between == ones and after == [2] * len(after)


def test_libraries_loaded_since_the_last_look_are_found_again():
    """The libraries are read without the lock while no module was imported since: one
    imported since makes the next hold look again (a BLAS it brought is held too)."""
    first = parallel.blas_libraries()
    assert parallel.blas_libraries() is first  # nothing imported: the same list
    import sys
    import types

    name = "distconv_test_module_imported_since"
    sys.modules[name] = types.ModuleType(name)
    try:
        again = parallel.blas_libraries()
    finally:
        del sys.modules[name]
    assert again is not first
    assert [lib.filepath for lib in again] == [lib.filepath for lib in first]


def test_holds_left_out_of_order_on_one_thread_keep_blas_held_until_the_last():
    """Two generators (or coroutines) on one thread, each holding across a ``yield``: the first
    in may leave first. BLAS stays at one thread while the other still holds, and a hold taken
    meanwhile runs held too; the last out gives BLAS its count back."""
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")

    def holding():
        with parallel.one_blas_thread():
            yield

    with threadpool_limits(limits=2, user_api="blas"):
        first, second = holding(), holding()
        next(first)
        next(second)
        next(first, None)  # the first in leaves, the second still holds
        still = (parallel._holders, _blas_threads())
        with parallel.one_blas_thread():
            meanwhile = _blas_threads()
        next(second, None)
        after = (parallel._holders, _blas_threads())
    ones = [1] * len(after[1])
    assert still == (1, ones) and meanwhile == ones
    assert after == (0, [2] * len(ones))


@pytest.mark.parametrize("own_hold", [True, False])
def test_a_hold_left_on_another_thread_is_left_for_the_thread_that_took_it(own_hold):
    """A hold entered on one thread and left on another (a generator closed there, an exit stack
    handed over) ends the entering thread's hold: the process-wide hold is given back, and that
    thread's next hold takes it again; the leaving thread's own hold, if any, is untouched."""
    hold = parallel.one_blas_thread()
    hold.__enter__()
    seen: dict[str, object] = {}

    def leave_it_here():
        try:
            if not own_hold:
                hold.__exit__(None, None, None)
                return
            with parallel.one_blas_thread():
                hold.__exit__(None, None, None)
                seen["own hold"] = parallel._holders
            seen["after own"] = parallel._holders
        except BaseException as error:  # noqa: BLE001 - reported below
            seen["error"] = error

    other = threading.Thread(target=leave_it_here)
    other.start()
    other.join(10)
    with parallel.one_blas_thread():
        seen["taken again"] = parallel._holders
    expected = {"own hold": 1, "after own": 0} if own_hold else {}
    assert seen == expected | {"taken again": 1}
    assert parallel._holders == 0
