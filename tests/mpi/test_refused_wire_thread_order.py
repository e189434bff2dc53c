"""The communication thread's failure reaches the main thread only once the thread is done with
MPI: an ``always`` call queued after the failure (the used-parameter flags' start, on every
rank even after a refused wire) runs there, and the main thread, told of the failure, calls MPI
at once (``close`` aborts the job): two threads must never be in MPI together
(``MPI_THREAD_SERIALIZED``)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi.thread import CommThread


def failing_reduce(bucket, wait, piece) -> None:
    raise RuntimeError("wire refused")


def a_bucket() -> SimpleNamespace:
    """What the thread reads of a bucket: its event, error, index and where it ends."""
    return SimpleNamespace(
        done=threading.Event(), error=None, index=0, ends_with=lambda piece: True
    )


@pytest.mark.timeout(20)
@pytest.mark.parametrize("how", ["wait", "finish"])
def test_the_failure_is_raised_after_the_always_calls_queued_behind_it(how):
    log: list[str] = []
    in_mpi = threading.Event()

    def start(wait) -> None:  # a start that takes a while on the thread, inside MPI
        in_mpi.set()
        time.sleep(0.3)
        log.append("started")

    thread = CommThread(failing_reduce, 0.0)
    try:
        bucket = a_bucket()
        thread.submit(bucket)
        if how == "finish":  # a call of its own queued before the start: skipped at once
            done = thread.call(lambda wait: None, "the flags' wait")
        thread.call(start, "start of the flags", always=True)
        with pytest.raises(SyncError, match="wire refused"):
            thread.wait(bucket) if how == "wait" else thread.finish(done)
        assert log == ["started"], "told of the failure while the thread was still in MPI"
        assert thread.reported and thread.failed == "allreduce of gradient bucket 0"
    finally:
        thread.stop()
    assert in_mpi.is_set()
