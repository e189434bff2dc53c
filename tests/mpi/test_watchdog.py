"""The watchdog (``distconv.sync.mpi.watchdog``): a rank that waits too long for the others
stops the job with a message naming the wait, where MPI alone would wait forever.

The jobs run under a real ``mpiexec -n 2`` with a 2 s timeout; ``run_mpi``'s timeout
(:data:`JOB_HANGS_AFTER`) turns a hang into a failure that names each rank's record, the test's
own (60 s) anything else. The watchdog's own bookkeeping is tested in one process, with
real threads.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import types
from contextlib import contextmanager

import numpy as np
import pytest

from distconv.optim import SGD
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.watchdog import (
    BLOCKING,
    DEFAULT_TIMEOUT,
    NON_BLOCKING,
    Watchdog,
    WatchedComm,
    check_timeout,
)
from tests.child_env import child_path
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = pytest.mark.timeout(60)

#: a failing job must end within this many seconds: a stalled job's stuck rank sleeps 60 s, so
#: any bound below that tells the watchdog's stop (a few seconds) from the sleep's end, with
#: room for a loaded host's slow start of four Pythons under mpiexec (15 s was raced)
JOB_ENDS_WITHIN = 40
#: ``run_mpi``'s limit: a job still running then is killed whole and fails the test naming
#: what ran, before the test's own timeout cuts it short and leaves the job running
JOB_HANGS_AFTER = 45


def with_mpiexec(test):
    """Marked ``mpi``, skipped where there is no ``mpiexec``."""
    for mark in NEEDS_MPIEXEC:
        test = mark(test)
    return test


def stalled_job(tmp_path, case: str, overlap: str, thread_level: str | None = None) -> str:
    """Run ``run_stall.py``; it must fail; every rank's record (stderr and log), joined."""
    command = ["-n", "2", *script("run_stall.py", thread_level), case, overlap, str(tmp_path)]
    began = time.monotonic()
    try:
        proc = run_mpi(command, timeout=JOB_HANGS_AFTER)
    except subprocess.TimeoutExpired:  # which rank hung, and where: each rank's own record
        records = records_of(tmp_path)
        pytest.fail(f"the job still ran after {JOB_HANGS_AFTER} s; the ranks' records:\n{records}")
    assert proc.returncode != 0, proc.stderr
    # a rank is stuck for a minute: only the watchdog (a few seconds) ends the job this soon
    assert time.monotonic() - began < JOB_ENDS_WITHIN
    return records_of(tmp_path)


def records_of(folder) -> str:
    """Every rank's record in ``folder`` (stderr and log), joined, each under its name."""
    return "\n".join(f"{f.name}:\n{f.read_text()}" for f in sorted(folder.glob("rank*.err")))


GRADIENT_WAIT = r"the Wait of an Iallreduce on the gradients communicator \(step 1\)"


@with_mpiexec
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_stuck_rank_ends_the_job_naming_the_gradient_wait(tmp_path, overlap):
    """Rank 1 stops mid-backward; rank 0 waits in a gradient reduction (on the communication
    thread with overlap) and stops the job, naming it; its warning came first, half-way."""
    pytest.importorskip("mpi4py")
    records = stalled_job(tmp_path, "stuck", overlap)
    warned = re.search(
        rf"rank 0 waited [\d.]+ s in {GRADIENT_WAIT} .*; the job stops at 2 s", records
    )
    assert warned, records
    assert re.search(rf"rank 0 waited [\d.]+ s in {GRADIENT_WAIT} .*; stopping the job", records)
    said = rf"rank 0: SyncError: waited [\d.]+ s in {GRADIENT_WAIT} .*aborting the MPI job"
    assert re.search(said, records), records
    assert "rank is stuck, or died without MPI noticing" in records
    assert "rank 1 waited" not in records  # the stuck rank waits for nobody


@with_mpiexec
def test_a_rank_that_does_not_come_to_a_second_setup_is_waited_for_in_setup(tmp_path):
    """A second fit after two steps, which rank 1 never reaches: rank 0's stop names setup as
    what it was doing (it said "after step 1", the phase of the steps before)."""
    pytest.importorskip("mpi4py")
    records = stalled_job(tmp_path, "late", "0")
    at_setup = r"the Wait of an Iallgather on the job communicator \(setup\)"
    said = rf"rank 0: SyncError: waited [\d.]+ s in {at_setup} .*aborting the MPI job"
    assert re.search(said, records), records


@with_mpiexec
def test_ranks_in_different_collectives_end_the_job(tmp_path):
    """The hang no exchange of the sync can see: after two steps rank 0 calls a collective of
    its own (a Barrier on the sync's communicator), rank 1 waits for step 2's check. Rank 1
    (the shorter timeout) stops the job naming its wait, after rank 0 has warned naming its
    own."""
    pytest.importorskip("mpi4py")
    records = stalled_job(tmp_path, "own", "0")
    at_check = r"the Wait of an Iallgather on the job communicator \(step 2\)"
    stop = rf"rank 1: SyncError: waited [\d.]+ s in {at_check} .*aborting the MPI job"
    assert re.search(stop, records), records
    warned = r"rank 0 waited [\d.]+ s in Barrier on the job communicator \(after step 1\)"
    assert re.search(rf"{warned} .*; the job stops at 4 s", records), records
    assert "rank 0: SyncError" not in records


AFTER_TWO = "ranks are at different points of the job (rank 0: {}, rank 1: {}){}; aborting"


SUMS = "summing 2 values after 2 steps"


@with_mpiexec
@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize(
    ("case", "rank0", "rank1", "hint"),
    [
        ("fewer", SUMS, "step 2", ""),
        ("closes", "closed after 2 steps", SUMS, "; a rank closed its sync while another went on"),
        ("barrier", "at the barrier after 2 steps", SUMS, ""),
        ("again", "comparing the job (setup's check) after 2 steps", "step 2", ""),
    ],
)
def test_ranks_that_disagree_on_what_comes_next_are_named_at_once(
    tmp_path, case, rank0, rank1, hint, overlap
):
    """After two steps rank 0 sums metrics while rank 1 starts step 2, or rank 0 closes or
    waits at the barrier while rank 1 sums, or sets up again while rank 1 starts step 2: the
    meetings (setup's too) open with the ranks' exchange of where they are, so a rank names the
    difference there, not the watchdog after its 600 s."""
    pytest.importorskip("mpi4py")
    records = stalled_job(tmp_path, case, overlap)
    said = AFTER_TWO.format(rank0, rank1, hint)
    assert f"rank 0: SyncError: {said}" in records or f"rank 1: SyncError: {said}" in records
    assert "waited" not in records, records


@with_mpiexec
def test_a_rank_closing_before_setup_ends_the_job_at_once(tmp_path):
    """A rank that caught an error before setup and closed its sync leaves another waiting in
    setup's first collective: the close aborts the job, naming it, not the watchdog later."""
    pytest.importorskip("mpi4py")
    records = stalled_job(tmp_path, "early", "0")
    said = (
        "rank 0: SyncError: sync closed in the middle of the job's start (setup was never called)"
    )
    assert f"{said}; aborting the MPI job" in records, records
    assert "waited" not in records  # ended long before any watchdog


@with_mpiexec
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_rank_whose_environment_disagrees_with_mpi_ends_the_job(tmp_path, monkeypatch, fmt):
    """``--rank 0`` on both ranks: rank 1 names the disagreement and aborts the job while rank
    0 waits in setup (under plain ``python``: no mpi4py runner to abort for it). Each rank's
    stderr goes straight to a file of its own (mpiexec may drop an aborting rank's). Under
    ``--log-format json`` that line, the aborting rank's last, is a JSON object too: it was
    plain text."""
    pytest.importorskip("mpi4py")
    # Open MPI's launcher alone sets OMPI_*; Hydra sets PMI_RANK (neither inherited from here)
    for stale in ("OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        monkeypatch.delenv(stale, raising=False)
    to_file = 'exec "$0" "$@" 2>"$ERRORS/rank${OMPI_COMM_WORLD_RANK:-$PMI_RANK}.err"'
    command = ["sh", "-c", to_file, sys.executable, "-m", "distconv", "train", "--sync", "mpi"]
    command += ["--rank", "0", "--world-size", "2", "--epochs", "1", "--no-progress"]
    command += ["--out", str(tmp_path / "run"), "--log-format", fmt]
    began = time.monotonic()
    monkeypatch.setenv("ERRORS", str(tmp_path))  # each rank inherits it
    proc = run_mpi(["-n", "2", *command], timeout=JOB_HANGS_AFTER)
    assert proc.returncode != 0
    assert time.monotonic() - began < JOB_ENDS_WITHIN  # the abort, not a 600 s watchdog
    said = "MPI says rank 1 of 2, but the environment (flags) says rank 0 of 2"
    record = (tmp_path / "rank1.err").read_text()
    line = f"rank 1: RuntimeConfigError: {said}; aborting the MPI job"
    if fmt == "text":
        assert f"{line}\n" in record, record
        return
    (entry,) = [json.loads(x) for x in record.splitlines() if "aborting" in x]  # JSON, or fails
    assert entry["message"] == line and entry["level"] == "error", entry


@with_mpiexec
def test_below_thread_multiple_the_rank_ends_itself_and_mpiexec_the_rest(tmp_path):
    """``MPI_Abort`` may not come from the watchdog's thread below MPI_THREAD_MULTIPLE: the
    waiting rank ends its own process instead, and mpiexec ends the job."""
    pytest.importorskip("mpi4py")
    records = stalled_job(tmp_path, "stuck", "0", thread_level="serialized")
    said = rf"rank 0: SyncError: waited [\d.]+ s in {GRADIENT_WAIT} .*; ending this rank"
    assert re.search(said, records), records
    assert "aborting the MPI job" not in records


@with_mpiexec
def test_every_communicator_call_of_the_sync_is_watched_or_local(tmp_path):
    """The watchdog wraps a fixed list of collectives: every name MPISync looks up on its
    communicators (thread or not, 16-bit wire or not, metrics, barrier, close) is on it, or
    asks nothing of the other ranks."""
    pytest.importorskip("mpi4py")
    out = tmp_path / "names.txt"
    proc = run_mpi(["-n", "2", *script("run_calls.py"), str(out)], timeout=JOB_HANGS_AFTER)
    assert proc.returncode == 0, proc.stderr
    names = set(out.read_text().split())
    local = {"Get_rank", "Get_size", "Free"}
    assert names - local <= {*BLOCKING, *NON_BLOCKING, "Dup"}, names
    assert {"Iallreduce", "Iallgather", "Ialltoall", "Allreduce", "Dup"} <= names


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


def waited(message: str) -> float:
    """The seconds a watchdog message says the call waited."""
    return float(re.match(r"(?:rank \d+ )?waited ([\d.]+) s in ", message).group(1))


@contextmanager
def watched(timeout: float, rank: int = 0, name: str = "job"):
    """A watchdog over a :class:`Blocking` communicator: (stops, watchdog, comm); on the way
    out the communicator's calls are let go and the watchdog closed."""
    stops = Stops()
    watchdog = Watchdog(timeout, stops, rank)
    comm = WatchedComm(Blocking(), watchdog, name)
    try:
        yield stops, watchdog, comm
    finally:
        comm.comm.go.set()
        watchdog.close()


def test_a_call_that_returns_in_time_stops_nothing():
    with watched(0.4, rank=3) as (stops, _, comm):
        for _ in range(5):
            comm.comm.go.set()
            comm.Allreduce(None, None)
            time.sleep(0.1)  # outside any call: 0.5 s in all, longer than the timeout
        assert not stops.called.wait(0.6)


def test_a_blocking_call_past_the_timeout_stops_the_job_once_naming_it(caplog):
    caplog.set_level(logging.WARNING, logger="distconv.sync.mpi")
    with watched(0.4, rank=3) as (stops, watchdog, comm):
        watchdog.phase = "step 7"
        threading.Thread(target=comm.Allreduce, args=(None, None), daemon=True).start()
        assert stops.called.wait(5)
        time.sleep(0.3)  # a second stop would come within a tick
    assert len(stops.messages) == 1
    said = stops.messages[0]
    assert said.startswith("waited ") and 0.4 <= waited(said) < 5
    assert "in Allreduce on the job communicator (step 7)" in said
    assert "timeout 0.4 s, --timeout or MPISync's timeout=" in said  # a script's name too
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == [f"rank 3 {said}; stopping the job"]  # in the log too


def test_a_call_past_the_warning_point_is_named_once_and_not_stopped(caplog):
    """Half the timeout (a minute at most) warns; a call that then returns stops nothing."""
    caplog.set_level(logging.WARNING, logger="distconv.sync.mpi")
    with watched(4.0, rank=1, name="gradients") as (stops, watchdog, comm):
        worker = threading.Thread(target=comm.Allreduce, args=(None, None))
        began = time.monotonic()
        worker.start()
        # the call returns once the warning is out (past 2 s), 1.6 s or more short of 4 s: a
        # fixed 3 s pause left the watchdog's thread one second to warn, and the call one to
        # return, on a host that may hold a thread back that long
        while not caplog.records:
            assert time.monotonic() - began < 3.5, "no warning past the warning point"
            time.sleep(0.01)
        comm.comm.go.set()
        worker.join(5)
        past_the_timeout = began + 4.0 + 2 * watchdog._tick - time.monotonic()
        assert not stops.called.wait(past_the_timeout)  # counted from the call's start
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1, warned
    assert warned[0].startswith("rank 1 waited ") and 2.0 <= waited(warned[0]) < 4.0
    assert "in Allreduce on the gradients communicator (setup)" in warned[0]
    assert warned[0].endswith("; the job stops at 4 s")


class FlakyWatchdog(Watchdog):
    """A watchdog whose first two looks raise."""

    fails = 2

    def _look(self, warned):
        if self.fails:
            self.fails -= 1
            raise RuntimeError("a look that fails")
        return super()._look(warned)


def test_a_look_that_fails_is_said_once_and_the_watching_goes_on(caplog):
    caplog.set_level(logging.WARNING, logger="distconv.sync.mpi")
    stops = Stops()
    watchdog = FlakyWatchdog(0.4, stops, rank=2)
    comm = WatchedComm(Blocking(), watchdog, "job")
    try:
        threading.Thread(target=comm.Allreduce, args=(None, None), daemon=True).start()
        assert stops.called.wait(5)  # the stall is still caught
    finally:
        comm.comm.go.set()
        watchdog.close()
    failed = [r for r in caplog.records if "look failed" in r.getMessage()]
    assert len(failed) == 1 and failed[0].exc_info[1].args == ("a look that fails",)
    assert "in Allreduce on the job communicator (setup)" in stops.messages[0]


def test_a_request_is_tested_as_it_is_and_its_wait_is_watched():
    with watched(0.4, name="gradients") as (stops, _, comm):
        request = comm.Iallreduce(None, None)
        assert request.Test.__self__ is request._request  # the request's own method, bound
        assert not request.Test()
        threading.Thread(target=request.Wait, daemon=True).start()
        assert stops.called.wait(5)
    assert "the Wait of an Iallreduce on the gradients communicator (setup)" in stops.messages[0]


def test_each_thread_has_its_own_wait():
    """The main thread leaving its call does not hide the communication thread's."""
    stops = Stops()
    watchdog = Watchdog(0.5, stops, rank=0)
    entered, release = threading.Event(), threading.Event()

    def thread_wait() -> None:
        watchdog.enter("the thread's wait")
        entered.set()
        release.wait(5)
        watchdog.leave()

    other = threading.Thread(target=thread_wait)
    try:
        other.start()
        assert entered.wait(5)  # the thread is inside its call before the main thread's
        watchdog.enter("the main thread's call")
        watchdog.leave()
        assert stops.called.wait(5)
        assert "in the thread's wait (setup)" in stops.messages[0]
    finally:
        release.set()
        watchdog.close()
        other.join(5)


def test_a_rank_ends_itself_by_sigkill_not_an_exit_status():
    """Hydra may reap a rank's plain exit before it reads the closed PMI connection, and then
    never ends the other ranks (see ``end_process``); a death by signal it always answers."""
    code = "from distconv.sync.mpi.watchdog import end_process; end_process()"
    done = subprocess.run([sys.executable, "-c", code], timeout=60)
    assert done.returncode == -signal.SIGKILL


def test_a_rank_that_ends_itself_gives_the_launcher_time_to_forward_why(monkeypatch):
    """Below MPI_THREAD_MULTIPLE the watchdog's rank kills itself instead of MPI_Abort: the
    line saying why is flushed and given leaving.FORWARD_SECONDS first, as before an Abort,
    or Hydra, ending the job, could lose it."""
    from distconv.sync.mpi import leaving
    from distconv.sync.mpi import watchdog as watchdog_mod

    events: list[str] = []

    class Err:
        def write(self, text: str) -> None:
            events.append("write")

        def flush(self) -> None:
            events.append("flush")

    monkeypatch.setattr(sys, "stderr", Err())
    monkeypatch.setattr(leaving, "FORWARD_SECONDS", 0.25)
    monkeypatch.setattr(
        leaving, "time", types.SimpleNamespace(sleep=lambda s: events.append(f"sleep {s}"))
    )
    monkeypatch.setattr(watchdog_mod, "end_process", lambda: events.append("end"))
    watchdog_mod.abort_on_stall(object(), 1, None)("step 3 waited 60 s")
    assert events == ["write", "flush", "sleep 0.25", "end"]


def test_a_rank_that_ends_itself_keeps_its_buffered_stdout():
    """Under a plain ``mpiexec`` a rank's stdout is a pipe, block-buffered: the SIGKILL with
    which the watchdog ends the rank dropped its last lines (an epoch's metrics) unless they
    were flushed first, as ``leaving.abort`` flushes them before an Abort."""
    code = (
        "from distconv.sync.mpi.watchdog import abort_on_stall\n"
        "print('epoch 3: loss 0.41')\n"
        "abort_on_stall(object(), 1, None)('step 4 waited 60 s')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = child_path()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=20
    )
    assert done.returncode == -signal.SIGKILL
    assert "step 4 waited 60 s; ending this rank" in done.stderr
    assert done.stdout == "epoch 3: loss 0.41\n"


def test_close_ends_the_watchdog_thread():
    watchdog = Watchdog(30.0, Stops(), rank=0)
    assert watchdog._thread.is_alive()
    watchdog.close()
    watchdog._thread.join(5)
    assert not watchdog._thread.is_alive()
    watchdog._writer._thread.join(5)  # the thread that writes its log ends with it
    assert not watchdog._writer._thread.is_alive()


def test_the_timeout_is_checked_and_one_rank_has_no_watchdog():
    assert check_timeout(None) is None and check_timeout(5) == 5.0
    assert check_timeout(np.float32(2.5)) == 2.5 and check_timeout(1e12) == 1e12
    for bad in (0, -1, float("nan"), float("inf"), True, "60"):
        with pytest.raises(ValueError, match="timeout must be a positive number"):
            check_timeout(bad)
    with pytest.raises(ValueError, match="timeout"):
        MPISync(SGD(lr=0.1), comm=SingleRankComm(), timeout=0)
    sync = MPISync(SGD(lr=0.1), comm=SingleRankComm())
    assert sync.timeout == DEFAULT_TIMEOUT == 600 and sync._watchdog.timeout is None
    assert isinstance(sync.comm, SingleRankComm)  # nothing to wait for, nothing watched
    assert not hasattr(sync._watchdog, "_thread")
