"""A Ctrl-C kept while the main thread waits for the communication thread keeps that wait's
deadline (``CommThread._await``).

``reduce_all`` keeps an interrupt raised in a wait for the thread and makes the wait again
(``to_the_end``), so this rank ends the step's collectives as the others do. The wait made
again counted the thread's patience afresh from its own start: a thread stuck in a collective's
start was named after up to twice ``PATIENCE x timeout``. A real thread, its
reduction blocked until released, stands in for one stuck on a broken link; a real signal
(SIGUSR1, its handler raising the KeyboardInterrupt a SIGINT would) interrupts the main
thread's wait.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi.thread import PATIENCE, CommThread
from distconv.sync.mpi.updates import to_the_end

pytestmark = pytest.mark.timeout(30)

#: the sync's timeout: the thread's patience is PATIENCE (1.5) times that
TIMEOUT = 0.8


class StuckBucket:
    """What the thread and its waits read of a bucket: index, done, error, ends_with."""

    index = 0

    def __init__(self) -> None:
        self.done, self.error = threading.Event(), None

    def ends_with(self, piece: int | None) -> bool:
        return True


@contextlib.contextmanager
def ctrl_c_after(seconds: float) -> Iterator[None]:
    """A SIGUSR1 to the main thread ``seconds`` into the block, its handler raising the
    KeyboardInterrupt a SIGINT would (no SIGALRM: pytest-timeout's timer is left alone)."""

    def ctrl_c(signum, frame):
        raise KeyboardInterrupt("Ctrl-C")

    previous = signal.signal(signal.SIGUSR1, ctrl_c)
    main = threading.main_thread().ident
    timer = threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGUSR1))
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()
        signal.signal(signal.SIGUSR1, previous)


def assert_named_after_patience(waited: float, kept: list[BaseException]) -> None:
    """The interrupt was kept, the wait made again; the thread named once it had gone its
    patience without moving on, not that after the interrupt (1.6 x patience: 1.92 s)."""
    assert [type(k) for k in kept] == [KeyboardInterrupt]
    assert PATIENCE * TIMEOUT - 0.05 < waited < 1.3 * PATIENCE * TIMEOUT, waited


def test_a_wait_made_again_after_a_kept_interrupt_keeps_its_deadline():
    release = threading.Event()
    thread = CommThread(lambda bucket, wait, piece: release.wait(20), 0, TIMEOUT)
    bucket, kept = StuckBucket(), []
    try:
        thread.submit(bucket)  # the thread enters the reduction and stays there
        while not thread.inside:
            time.sleep(0.01)
        began = thread.moved  # its patience counts from here (and the wait's start)
        with ctrl_c_after(0.6 * PATIENCE * TIMEOUT):
            with pytest.raises(SyncError, match="still inside the allreduce of gradient bucket 0"):
                to_the_end(thread.wait, kept, bucket)  # as reduce_all waits for a bucket
        waited = time.monotonic() - began
    finally:
        release.set()
        thread.stop(5)
    assert_named_after_patience(waited, kept)


def test_a_settling_made_again_after_a_kept_interrupt_keeps_its_deadline():
    """After the thread's failure its report waits for the thread to settle (run what was
    queued: the flags' start, which every rank makes, stuck here on a broken link). The wait
    made again reported again, queuing a new settling whose patience began afresh."""

    def broken(bucket, wait, piece):
        raise RuntimeError("the link to rank 1 is broken")

    release = threading.Event()
    thread = CommThread(broken, 0, TIMEOUT)
    bucket, kept = StuckBucket(), []
    try:
        thread.submit(bucket)
        thread.call(lambda wait: release.wait(20), "start of the used-parameter flags", True)
        while thread.inside != "the start of the used-parameter flags":
            time.sleep(0.01)
        began = time.monotonic()  # the thread moved on just now: its patience counts from here
        with ctrl_c_after(0.6 * PATIENCE * TIMEOUT):
            with pytest.raises(SyncError, match="link to rank 1 is broken; waited for the comm"):
                to_the_end(thread.wait, kept, bucket)  # the bucket failed: the report settles
        waited = time.monotonic() - began
    finally:
        release.set()
        thread.stop(5)
    assert_named_after_patience(waited, kept)


def test_a_stop_made_again_after_an_interrupt_waits_for_the_thread_with_its_deadline():
    """A Ctrl-C in a stop's wait (a setup's, a close's: the thread still inside a reduction)
    left the thread stopping: the stop made again (a second setup) returned at once, the thread
    still inside, and the caller went on to call MPI beside it."""
    release = threading.Event()
    thread = CommThread(lambda bucket, wait, piece: release.wait(20), 0, TIMEOUT)
    try:
        thread.submit(StuckBucket())
        while not thread.inside:
            time.sleep(0.01)
        began = thread.moved
        with ctrl_c_after(0.6 * PATIENCE * TIMEOUT):
            with pytest.raises(KeyboardInterrupt):
                thread.stop()
        with pytest.raises(SyncError, match="to stop: .* still inside the allreduce of gradient"):
            thread.stop()  # made again: waits on, from the first stop's start
        waited = time.monotonic() - began
    finally:
        release.set()
        thread._thread.join(5)
    assert PATIENCE * TIMEOUT - 0.05 < waited < 1.3 * PATIENCE * TIMEOUT, waited
