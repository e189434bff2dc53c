"""A rank whose ``MPI_Abort`` hangs still ends, within the abort grace.

``leaving.abort`` (close's abort, the exception hook's, ``abort_job``'s) called ``comm.Abort``,
then ``_exit``: should ``MPI_Abort`` itself hang, the rank, and with it the job, hung for ever.
Only the watchdog's stop armed a last-resort timer (``ABORT_GRACE``). Now every abort does
(``leaving.last_resort``): the process ends by SIGKILL once the grace has passed. MPICH's
Abort does not hang, so a communicator stand-in whose ``Abort`` blocks shows it, in a process
of its own (a real one: the SIGKILL ends it).
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.child_env import child_path

REPO = str(Path(__file__).resolve().parents[2])

#: the grace the child sets (the real one, 10 s, would only slow the test down)
GRACE = 1.0


def run_child(code: str, timeout: float = 20) -> tuple[subprocess.CompletedProcess | None, float]:
    """Run ``code`` in a Python process of its own: its result (None where it ran past
    ``timeout``, killed) and the seconds it took."""
    env = {**os.environ, "PYTHONPATH": child_path()}
    began = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - began
    return done, time.monotonic() - began


def ended_by_last_resort(code: str, hung: str) -> subprocess.CompletedProcess:
    """Run ``code``, which blocks for ever, and check that the last resort ended it: by
    SIGKILL (as the watchdog's ``end_process`` ends a rank: Hydra always answers that), once
    the grace had passed; the test fails with ``hung`` where it never ended."""
    done, took = run_child(code)
    if done is None:
        pytest.fail(hung)
    assert done.returncode == -signal.SIGKILL, done
    assert GRACE <= took < GRACE + 10, took
    return done


CHILD = """
import threading, sys
from distconv.sync.mpi import leaving

class HungComm:
    def Abort(self, status):
        print("in Abort", flush=True)
        threading.Event().wait()  # MPI_Abort that never returns

leaving.ABORT_GRACE = {grace}
leaving.FORWARD_SECONDS = 0.0
{call}
print("returned", flush=True)
"""

CALLS = {
    "abort": "leaving.abort(HungComm(), 3)",
    "abort_job": "leaving.abort_job(HungComm(), 1, RuntimeError('a layer raised'))",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", sorted(CALLS))
def test_a_hung_mpi_abort_ends_the_rank_within_the_grace(how):
    code = CHILD.format(grace=GRACE, call=CALLS[how])
    done = ended_by_last_resort(code, f"{how}: MPI_Abort hung and the process never ended")
    assert "in Abort" in done.stdout and "returned" not in done.stdout, done


RAISING = """
from distconv.sync.mpi import leaving

class BrokenComm:
    def Abort(self, status):
        raise RuntimeError("MPI_Abort failed: the communicator is broken")

leaving.FORWARD_SECONDS = 0.0
try:
    {call}
finally:
    print("after the abort", flush=True)  # a caller's clean-up (a checkpoint): never runs
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", sorted(CALLS))
def test_an_mpi_abort_that_raises_still_ends_the_rank_by_signal(how):
    """``_exit`` came after ``comm.Abort``, not in a ``finally``: an Abort that raised skipped
    it, and the error went on up through the caller's clean-up (its checkpoint written from
    a step that failed), ending the process with a plain status, which Hydra may miss (see
    ``leaving.end_process``). Now it ends by SIGKILL at once, as the watchdog's stop did."""
    call = CALLS[how].replace("HungComm", "BrokenComm")
    done, _ = run_child(RAISING.format(call=call))
    assert done is not None, "the process never ended"
    assert "after the abort" not in done.stdout, done
    assert done.returncode == -signal.SIGKILL, done


HOOKED = """
import sys, threading
from distconv.sync.mpi import leaving

class Comm:
    def Abort(self, status):
        print("aborted", flush=True)
        leaving.os._exit(status)

def stuck_hook(etype, value, tb):  # a logging handler stuck on a dead collector
    print("in the previous hook", flush=True)
    threading.Event().wait()

leaving.ABORT_GRACE = {grace}
sys.excepthook = stuck_hook
leaving.install_abort_hook(Comm())
raise RuntimeError("a layer raised")
"""


@pytest.mark.timeout(60)
def test_a_hook_stuck_before_the_abort_still_ends_the_rank_within_the_grace():
    """The exception hook hands the error to the hook it replaced (a logging one), then
    aborts: one that never returned left the rank, and the job, hung, the last resort armed
    only at the Abort. Now it is armed before the previous hook runs."""
    done = ended_by_last_resort(
        HOOKED.format(grace=GRACE), "the previous hook hung and the process never ended"
    )
    assert "in the previous hook" in done.stdout and "aborted" not in done.stdout, done


class NoThreads:
    """``threading`` as leaving sees it where no thread can start: exhausted (the very errors
    a rank aborts on, a ``MemoryError``, a resource limit) or, from Python 3.12, an interpreter
    shutting down (a close in an ``atexit`` handler)."""

    class Timer(threading.Timer):
        def start(self) -> None:
            raise RuntimeError("can't start new thread")


class InterruptedStart:
    """``threading`` as leaving sees it when a second Ctrl-C lands while the last resort's
    thread starts (``Thread.start`` waits for it to run: the main thread's signal handler
    raises there)."""

    class Timer(threading.Timer):
        def start(self) -> None:
            super().start()
            raise KeyboardInterrupt


class InterruptedCancel:
    """``threading`` as leaving sees it when a second Ctrl-C lands while a last resort is
    disarmed (``Event.set`` is Python code: the main thread's signal handler may raise in it
    after the timer is disarmed)."""

    class Timer(threading.Timer):
        def cancel(self) -> None:
            super().cancel()
            raise KeyboardInterrupt


#: the status each way of aborting in :func:`abort_by` is given
STATUS = {"abort": 3, "abort_job": 1, "hook": 1}


def armed_last_resorts() -> list[threading.Timer]:
    """The timers still armed in this process (a last resort not disarmed)."""
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    return [t for t in timers if not t.finished.is_set()]


def abort_by(
    how: str,
    monkeypatch,
    threads,
    aborted: list[int],
    exits: list[int],
    covered: list[bool] | None = None,
) -> None:
    """Abort by ``how`` (``abort``, ``abort_job`` or the exception ``hook``) on a stand-in
    communicator, with ``threads`` as leaving's ``threading``; the statuses given to ``Abort``
    and to ``_exit`` are appended to ``aborted`` and ``exits``, and to ``covered`` whether a
    last resort was armed as each ``Abort`` went out."""
    covered = [] if covered is None else covered
    from distconv.sync.mpi import leaving

    class Comm:
        def Abort(self, status: int) -> None:  # noqa: N802 - mpi4py's name
            aborted.append(status)
            covered.append(bool(armed_last_resorts()))

    monkeypatch.setattr(leaving, "threading", threads)
    monkeypatch.setattr(leaving, "FORWARD_SECONDS", 0.0)
    monkeypatch.setattr(leaving, "_exit", exits.append)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    error = RuntimeError("a layer raised")
    if how == "abort":
        leaving.abort(Comm(), STATUS[how])
    elif how == "abort_job":
        leaving.abort_job(Comm(), 1, error)
    else:
        monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
        restore = leaving.install_abort_hook(Comm())
        try:
            sys.excepthook(type(error), error, None)
        finally:
            restore()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["abort", "abort_job", "hook"])
def test_a_last_resort_that_cannot_start_never_stops_the_abort(monkeypatch, how):
    """Arming the last resort came first and raised where no thread could start: ``abort``,
    ``abort_job`` and the exception hook raised before ``MPI_Abort``, and the other ranks,
    waiting in a collective for this one, hung. The abort must go out all the same."""
    aborted: list[int] = []
    exits: list[int] = []
    abort_by(how, monkeypatch, NoThreads, aborted, exits)
    assert aborted == [STATUS[how]] and exits == [STATUS[how]]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["abort", "abort_job", "hook"])
def test_a_ctrl_c_while_the_last_resort_starts_never_stops_the_abort(monkeypatch, how):
    """The last resort was armed outside the ``try`` whose ``finally`` aborts (which guards a
    second Ctrl-C in the pause): a Ctrl-C while its thread started went up with no
    ``MPI_Abort``, the other ranks hung. It now still aborts, the timer disarmed (it would
    SIGKILL a process that goes on, as this one does with the stand-in ``_exit``)."""
    aborted: list[int] = []
    exits: list[int] = []
    with pytest.raises(KeyboardInterrupt):  # after the Abort: _exit's stand-in returns
        abort_by(how, monkeypatch, InterruptedStart, aborted, exits)
    assert aborted == [STATUS[how]] and exits == [STATUS[how]]
    assert not armed_last_resorts(), "a last resort left armed"


SLOW = """
import sys, time
from distconv.sync.mpi import leaving

class Preempted(Exception):
    exit_status = 143  # what a scheduler reads to requeue the run

class Comm:
    def Abort(self, status):
        print("aborted", flush=True)
        leaving.os._exit(status)

class SlowStream:  # a stderr pipe the launcher drains slowly
    def write(self, text):
        time.sleep({slow})
    def flush(self):
        pass

def slow_hook(etype, value, tb):  # a logging handler that takes its time, and returns
    time.sleep({slow})

leaving.ABORT_GRACE = {grace}
leaving.FORWARD_SECONDS = {forward}
if "{how}" == "hook":
    sys.excepthook = slow_hook
    leaving.install_abort_hook(Comm())
    raise Preempted("preempted")
sys.stderr = SlowStream()
leaving.abort_job(Comm(), 0, Preempted("preempted"))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["hook", "abort_job"])
def test_a_slow_stage_before_the_abort_leaves_the_abort_its_own_grace(how):
    """The last resort armed before the previous hook (or ``abort_job``'s printing) also had
    to cover the pause and ``MPI_Abort`` after it: a hook or a stderr that took most of the
    grace, and returned, had the rank SIGKILLed in the pause, the Abort never made, and the
    job's exit status (a preempted run's 143, which a scheduler requeues on) lost. The Abort
    now gets a whole grace of its own."""
    # slow + forward > grace, each alone well under it: by a second, which a loaded machine's
    # start-up and scheduling took from half of one (seen under four test workers on two CPUs)
    grace, slow, forward = 4.0, 3.0, 2.0
    code = SLOW.format(grace=grace, slow=slow, forward=forward, how=how)
    done, _ = run_child(code, timeout=30)
    assert done is not None, "the process never ended"
    assert "aborted" in done.stdout, done
    assert done.returncode == 143, done


STALLED = """
import sys, threading
from distconv.sync.mpi import leaving
from distconv.sync.mpi.watchdog import abort_on_stall

class BlockedStream:  # a stderr pipe nobody reads: the write never returns
    def write(self, text):
        print("writing", flush=True)
        threading.Event().wait()
    def flush(self):
        pass

leaving.ABORT_GRACE = {grace}
sys.stderr = BlockedStream()
abort_on_stall(object(), 1, None)("step 3 waited 60 s")  # below MPI_THREAD_MULTIPLE
"""


@pytest.mark.timeout(60)
def test_a_watchdog_stop_without_abort_blocked_in_its_printing_still_ends_the_rank():
    """Below ``MPI_THREAD_MULTIPLE`` the watchdog's stop prints why, then kills its rank,
    with no ``MPI_Abort`` and so no last resort: a write to a stderr pipe nobody reads (what
    ``abort_job`` arms the last resort against) left the rank, the hang breaker itself, and
    the job hung for ever."""
    done = ended_by_last_resort(
        STALLED.format(grace=GRACE),
        "the watchdog's stop blocked in its printing and the rank never ended",
    )
    assert "writing" in done.stdout, done


LOGGED = """
import logging, threading, time
from distconv.sync.mpi import leaving
from distconv.sync.mpi.watchdog import Watchdog, abort_on_stall

class BlockedHandler(logging.Handler):  # a handler on a stderr pipe nobody reads
    def emit(self, record):
        if record.levelno >= logging.ERROR:
            print("logging", flush=True)
            threading.Event().wait()

logging.getLogger("distconv.sync.mpi").addHandler(BlockedHandler())
leaving.ABORT_GRACE = {grace}
watchdog = Watchdog(0.2, abort_on_stall(object(), 1, None), rank=1)
watchdog.enter("Allreduce on the job communicator")  # a call the other rank never joins
time.sleep(60)
"""


@pytest.mark.timeout(60)
def test_a_watchdog_whose_log_of_the_stop_blocks_still_ends_the_rank():
    """The watchdog logs the stalled call (``log.error``) before its stop arms the last
    resort: a handler that blocked there (a stderr pipe nobody reads, a dead collector: what
    the stop's own timer covers) left the hang breaker, and with it the job, hung for ever."""
    done = ended_by_last_resort(
        LOGGED.format(grace=GRACE), "the watchdog blocked in its log and the rank never ended"
    )
    assert "logging" in done.stdout, done


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["abort", "abort_job", "hook"])
def test_a_ctrl_c_while_a_last_resort_is_disarmed_never_stops_the_abort(monkeypatch, how):
    """The abort disarmed the caller's last resort (``abort_job``'s, the hook's) before the
    ``try`` whose ``finally`` aborts: a Ctrl-C there went up with that timer disarmed and no
    ``MPI_Abort``, and the other ranks hung. And it disarmed its own, once ``Abort`` returned,
    before ending the process: a Ctrl-C there skipped the end, and the process went on with
    nothing left to end it. It now aborts and ends all the same."""
    aborted: list[int] = []
    exits: list[int] = []
    with pytest.raises(KeyboardInterrupt):  # after the Abort: _exit's stand-in returns
        abort_by(how, monkeypatch, InterruptedCancel, aborted, exits)
    assert aborted == [STATUS[how]] and exits == [STATUS[how]]


SILENCED = """
import logging, threading, time
from distconv.sync.mpi import leaving
from distconv.sync.mpi.watchdog import Watchdog, abort_on_stall

class Handler(logging.Handler):
    def emit(self, record):
        if {which}:
            print("logging", flush=True)
            {then}

class FailingOnce(Watchdog):  # its first look fails, as a bug in it would
    failed = False
    def _look(self, warned):
        if not self.failed:
            self.failed = True
            raise RuntimeError("a look that fails")
        return super()._look(warned)

logging.getLogger("distconv.sync.mpi").addHandler(Handler())
leaving.ABORT_GRACE = {grace}
watchdog = FailingOnce(0.4, abort_on_stall(object(), 1, None), rank=1)
watchdog.enter("Allreduce on the job communicator")  # a call the other rank never joins
time.sleep(60)
"""

#: the record a handler is stuck on, or fails on, and what it does then
HANDLERS = {
    "the half-way warning blocks": (
        "record.levelno == logging.WARNING",
        "threading.Event().wait()",
    ),
    "the failed look's log blocks": ("record.exc_info is not None", "threading.Event().wait()"),
    "the stop's log raises": (
        "record.levelno == logging.ERROR and record.exc_info is None",
        "raise OSError('the collector is gone')",
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("handler", list(HANDLERS))
def test_a_log_handler_that_blocks_or_raises_never_keeps_the_watchdog_from_its_stop(handler):
    """The watchdog's thread ran the log handlers itself: one stuck on its half-way warning or
    on the log of a failed look (a stderr pipe nobody reads, a dead collector) stopped the hang
    breaker, so the stall was never stopped (and the process could not even exit: logging's
    shutdown waits for that handler), and one that raised on the stop's log ended its thread
    before the stop. A thread of their own writes them now: the stop comes all the same."""
    which, then = HANDLERS[handler]
    done, took = run_child(SILENCED.format(which=which, then=then, grace=GRACE))
    if done is None:
        pytest.fail(f"{handler} and the stall was never stopped")
    assert done.returncode == -signal.SIGKILL, done  # the stop, below MPI_THREAD_MULTIPLE
    assert "Allreduce on the job communicator" in done.stderr, done
    assert "ending this rank" in done.stderr and "logging" in done.stdout, done
    assert took < GRACE + 10, took


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", ["abort", "abort_job", "hook"])
def test_a_ctrl_c_while_a_last_resort_is_disarmed_leaves_the_abort_covered(monkeypatch, how):
    """The abort disarmed the caller's last resort (``abort_job``'s, the hook's) before it
    armed its own: a Ctrl-C landing as the caller's was disarmed sent the ``MPI_Abort`` out
    with no timer at all, and an Abort that hung (what the last resort is for) hung the rank,
    and the job, for ever. Its own is armed first now, so one covers the Abort either way, and
    neither is left armed once the Abort returned."""
    aborted: list[int] = []
    exits: list[int] = []
    covered: list[bool] = []
    with pytest.raises(KeyboardInterrupt):  # after the Abort: _exit's stand-in returns
        abort_by(how, monkeypatch, InterruptedCancel, aborted, exits, covered)
    assert aborted == [STATUS[how]] and covered == [True], "an Abort with no last resort"
    assert not armed_last_resorts(), "a last resort left armed"
