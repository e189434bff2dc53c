"""Batch chunks on threads: BLAS is held to one thread inside, and given its count back after."""

from __future__ import annotations

import threading

import pytest
from threadpoolctl import ThreadpoolController, threadpool_limits

from distconv.kernels.parallel import chunk_bounds, over_batch


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

    def rank_a():  # two samples: a batch of one is not split and needs no hold
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
