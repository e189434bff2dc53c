"""Batch chunks on threads: BLAS is held to one thread inside, and given its count back after."""

from __future__ import annotations

import pytest
from threadpoolctl import ThreadpoolController, threadpool_limits

from distconv.kernels.parallel import chunk_bounds, over_batch


def _blas_threads() -> list[int]:
    return [
        lib.num_threads for lib in ThreadpoolController().select(user_api="blas").lib_controllers
    ]


@pytest.mark.parametrize("work", [1, 1 << 22])  # the serial path and the threaded one
def test_blas_runs_on_one_thread_inside_and_is_restored(work):
    if not _blas_threads():
        pytest.skip("no BLAS library found by threadpoolctl")
    with threadpool_limits(limits=2, user_api="blas"):
        seen = over_batch(lambda a, b: _blas_threads(), 4, work)
        after = _blas_threads()
    assert all(threads == [1] * len(after) for threads in seen)
    assert after == [2] * len(after)


def test_chunks_cover_the_batch_in_order():
    assert chunk_bounds(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert chunk_bounds(2, 5) == [(0, 1), (1, 2)]
