"""The kernel threads' pool grown by one Python thread while another hands it work (k251)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from distconv.kernels import parallel


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
