"""The watchdog (``distconv.sync.mpi.watchdog``): a rank that waits too long for the others
stops the job with a message naming the wait, where MPI alone would wait forever.

The jobs run under a real ``mpiexec -n 2`` with a 2 s timeout; the test's own timeout (30 s)
turns a hang into a failure. The watchdog's own bookkeeping is tested in one process, with
real threads.
"""

from __future__ import annotations

import logging
import re
import threading
import time

import pytest

from distconv.optim import SGD
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.watchdog import (
    DEFAULT_TIMEOUT,
    Watchdog,
    WatchedComm,
    check_timeout,
)
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = pytest.mark.timeout(30)


def with_mpiexec(test):
    """Marked ``mpi``, skipped where there is no ``mpiexec``."""
    for mark in NEEDS_MPIEXEC:
        test = mark(test)
    return test


def stalled_job(tmp_path, case: str, overlap: str, thread_level: str | None = None) -> str:
    """Run ``run_stall.py``; it must fail; every rank's record (stderr and log), joined."""
    command = ["-n", "2", *script("run_stall.py", thread_level), case, overlap, str(tmp_path)]
    began = time.monotonic()
    proc = run_mpi(command, timeout=25)
    assert proc.returncode != 0, proc.stderr
    # stuck for a minute, so only the watchdog can have ended the job this soon
    assert time.monotonic() - began < 25
    return "\n".join(f.read_text() for f in sorted(tmp_path.glob("rank*.err")))


@with_mpiexec
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_stuck_rank_ends_the_job_naming_the_gradient_wait(tmp_path, overlap):
    """Rank 1 stops mid-backward; rank 0 waits in a gradient reduction (on the communication
    thread with overlap) and stops the job, naming it; its warning came first, half-way."""
    pytest.importorskip("mpi4py")
    records = stalled_job(tmp_path, "stuck", overlap)
    said = r"waited [\d.]+ s in the Wait of an Iallreduce on the gradients communicator \(step 1\)"
    warning = re.search(rf"rank 0 {said} .*; the job stops at 2 s", records)
    assert warning, records
    assert re.search(rf"rank 0: SyncError: {said} .*aborting the MPI job", records), records
    assert "rank is stuck, or died without MPI noticing" in records


@with_mpiexec
def test_ranks_in_different_collectives_end_the_job(tmp_path):
    """The hang the per-step check cannot see: rank 0 sums metrics after two steps, rank 1
    waits for step 2's check. Each names where it waits; the first to time out stops the job."""
    pytest.importorskip("mpi4py")
    records = stalled_job(tmp_path, "fewer", "0")
    assert re.search(
        r"rank 0 waited [\d.]+ s in Allreduce on the job communicator \(after step 1\)", records
    ), records
    assert re.search(
        r"rank 1 waited [\d.]+ s in the Wait of an Iallgather on the job communicator \(step 2\)",
        records,
    ), records
    assert "aborting the MPI job" in records


@with_mpiexec
def test_below_thread_multiple_the_rank_ends_itself_and_mpiexec_the_rest(tmp_path):
    """``MPI_Abort`` may not come from the watchdog's thread below MPI_THREAD_MULTIPLE: the
    waiting rank ends its own process instead, and mpiexec ends the job."""
    pytest.importorskip("mpi4py")
    records = stalled_job(tmp_path, "stuck", "0", thread_level="serialized")
    assert "rank 0: SyncError: waited" in records and "; ending this rank" in records, records
    assert "aborting the MPI job" not in records


# -- the watchdog on its own --------------------------------------------------------------------
class Stops:
    """A ``stop_job`` that records its message (the real one never returns)."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.called = threading.Event()

    def __call__(self, message: str) -> None:
        self.messages.append(message)
        self.called.set()


class Blocking:
    """A communicator whose ``Allreduce`` blocks until ``go`` is set, and whose requests are
    tested and waited for the same way."""

    def __init__(self) -> None:
        self.go = threading.Event()

    def Allreduce(self, *args):  # noqa: N802 - mpi4py's spelling
        self.go.wait(20)

    def Iallreduce(self, *args):  # noqa: N802
        return Request(self.go)

    def Get_size(self):  # noqa: N802
        return 2


class Request:
    def __init__(self, go: threading.Event) -> None:
        self.go = go

    def Test(self):  # noqa: N802
        return self.go.is_set()

    def Wait(self):  # noqa: N802
        self.go.wait(20)


def test_a_call_that_returns_in_time_stops_nothing():
    stops = Stops()
    watchdog = Watchdog(0.4, stops, rank=3)
    comm = WatchedComm(Blocking(), watchdog, "job")
    try:
        for _ in range(5):
            comm.comm.go.set()
            comm.Allreduce(None, None)
            time.sleep(0.1)  # outside any call: 0.5 s in all, longer than the timeout
        assert not stops.called.wait(0.6)
    finally:
        watchdog.close()


def test_a_blocking_call_past_the_timeout_stops_the_job_once_naming_it(caplog):
    stops = Stops()
    watchdog = Watchdog(0.4, stops, rank=3)
    watchdog.phase = "step 7"
    comm = WatchedComm(Blocking(), watchdog, "job")
    caplog.set_level(logging.WARNING, logger="distconv.sync.mpi")
    try:
        worker = threading.Thread(target=comm.Allreduce, args=(None, None))
        worker.start()
        assert stops.called.wait(5)
        time.sleep(0.3)  # a second stop would come within a tick
        assert len(stops.messages) == 1
        assert re.match(
            r"waited 0\.[4-9] s in Allreduce on the job communicator \(step 7\)", stops.messages[0]
        )
        assert "timeout 0.4 s, --timeout" in stops.messages[0]
        warned = [r.getMessage() for r in caplog.records]
        assert len(warned) == 1 and re.match(r"rank 3 waited 0\.[2-4] s in Allreduce", warned[0]), (
            warned
        )
    finally:
        comm.comm.go.set()
        watchdog.close()
        worker.join(5)


def test_a_request_is_tested_as_it_is_and_its_wait_is_watched():
    stops = Stops()
    watchdog = Watchdog(0.4, stops, rank=0)
    comm = WatchedComm(Blocking(), watchdog, "gradients")
    try:
        request = comm.Iallreduce(None, None)
        assert request.Test.__self__ is request._request  # the request's own method, bound
        assert not request.Test()
        threading.Thread(target=request.Wait, daemon=True).start()
        assert stops.called.wait(5)
        assert (
            "the Wait of an Iallreduce on the gradients communicator (setup)" in stops.messages[0]
        )
    finally:
        comm.comm.go.set()
        watchdog.close()


def test_each_thread_has_its_own_wait():
    """The main thread leaving its call does not hide the communication thread's."""
    stops = Stops()
    watchdog = Watchdog(0.5, stops, rank=0)
    other = threading.Thread(target=lambda: (watchdog.enter("the thread's wait"), time.sleep(1.2)))
    try:
        other.start()
        watchdog.enter("the main thread's call")
        watchdog.leave()
        assert stops.called.wait(5)
        assert re.match(r"waited 0\.[5-9] s in the thread's wait", stops.messages[0])
    finally:
        watchdog.close()
        other.join(5)


def test_the_timeout_is_checked_and_one_rank_has_no_watchdog():
    assert check_timeout(None) is None and check_timeout(5) == 5.0
    for bad in (0, -1, float("nan"), float("inf"), True, "60"):
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            check_timeout(bad)
    with pytest.raises(ValueError, match="timeout"):
        MPISync(SGD(lr=0.1), comm=SingleRankComm(), timeout=0)
    sync = MPISync(SGD(lr=0.1), comm=SingleRankComm())
    assert sync.timeout == DEFAULT_TIMEOUT and sync._watchdog.timeout is None
    assert isinstance(sync.comm, SingleRankComm)  # nothing to wait for, nothing watched
    assert not hasattr(sync._watchdog, "_thread")
