"""How a rank leaves (``distconv.sync.mpi.leaving``): the last exchange only where the ranks'
collectives still match, and a thread that will not stop named, never left running."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi.clean_leave import leave, why_not_leave
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import UsedParams
from tests.mpi.common import RecordingComm

pytestmark = pytest.mark.timeout(30)


class Queued:
    """Stands in for a bucket: the thread's reduction of it blocks until ``go`` is set, then
    raises ``fault`` (if any)."""

    index = 0

    def __init__(self, fault: BaseException | None = None) -> None:
        self.go, self.fault = threading.Event(), fault
        self.done, self.error = threading.Event(), None

    def ends_with(self, piece: int | None) -> bool:
        return True


def reduce(bucket: Queued, wait, piece) -> None:
    bucket.go.wait(20)
    if bucket.fault is not None:
        raise bucket.fault


def test_a_thread_still_inside_a_reduction_after_the_timeout_is_named_and_stopped_once():
    thread = CommThread(reduce)
    stuck = Queued()
    thread.submit(stuck)
    with pytest.raises(SyncError, match="did not stop within 0.2 s: a reduction still waits"):
        thread.stop(timeout=0.2)
    stuck.go.set()
    thread.stop()  # asked once already: returns at once, no second wait
    thread._thread.join(5)
    assert not thread._thread.is_alive()


def test_a_reduction_that_fails_while_the_thread_drains_its_queue_stops_the_last_exchange():
    """The queue held a reduction when close() began; it fails while the thread stops, so
    the ranks' collectives differ: no closing exchange, and the cause is raised (and handed
    to ``abort``, the job's, first)."""
    comm = RecordingComm()
    thread = CommThread(reduce)
    queued = Queued(RuntimeError("link lost"))
    thread.submit(queued)
    aborted = []
    stop = thread.stop

    def stop_once_it_fails(timeout: float = 30.0) -> None:  # the reduction fails during stop
        queued.go.set()
        stop(timeout)

    thread.stop = stop_once_it_fails
    with pytest.raises(SyncError, match="failed on the communication thread: link lost"):
        leave(StepCheck(comm), UsedParams(comm, 1, None), thread, 0, aborted.append)
    assert "Iallgather closing" not in comm.log
    assert [str(e) for e in aborted] == [
        "sync closed after allreduce of gradient bucket 0 failed on the communication thread: "
        "link lost"
    ]


def _failed_unreported() -> CommThread:
    """A thread whose last work (the zeroing of a used buffer, queued after the last step)
    failed, with nothing since that would have raised it."""
    thread = CommThread(reduce)
    thread.zero(object())  # no .fill: AttributeError on the thread
    for _ in range(1000):
        if thread.error is not None:
            return thread
        threading.Event().wait(0.01)
    raise AssertionError("the zeroing did not fail")


def test_a_failure_after_the_last_step_is_said_at_close_even_with_one_rank():
    """It landed before the close began, so ``failed`` was already true and the close
    returned without a word: the step's parameters were updated, but the buffer
    it failed to zero was not."""
    comm = RecordingComm()
    thread = _failed_unreported()
    with pytest.raises(SyncError, match="sync closed after zeroing a used gradient buffer failed"):
        leave(StepCheck(comm), UsedParams(comm, 1, None), thread, 1)
    assert "Iallgather closing" not in comm.log  # the ranks' collectives may differ


def test_a_failure_a_step_raised_already_is_not_raised_again_at_close():
    comm = RecordingComm()
    thread = _failed_unreported()
    done = thread.call(lambda wait: None, "a later collective")
    with pytest.raises(SyncError, match="zeroing a used gradient buffer failed"):
        thread.finish(done)  # as finish_step raises it
    leave(StepCheck(comm), UsedParams(comm, 1, None), thread, 1)  # quiet
    assert "Iallgather closing" not in comm.log


def test_a_later_failure_does_not_replace_the_one_a_step_raised():
    """The zeroing runs after a failure too (it calls no MPI); failing then, it replaced the
    first failure, which a step had raised: the close would have said the second one, or
    nothing about the first."""
    thread = _failed_unreported()
    first = thread.error
    done = thread.call(lambda wait: None, "a later collective")
    with pytest.raises(SyncError):
        thread.finish(done)
    thread.zero(object())  # fails too
    thread.stop()
    assert thread.error is first and thread.failed == "zeroing a used gradient buffer"


def test_a_clean_leave_drains_then_meets_the_others_once():
    comm = RecordingComm()
    check, used = StepCheck(comm), UsedParams(comm, 2, None)
    check.post(3, {}, 0, 4)
    used.post()
    thread = CommThread(reduce)
    leave(check, used, thread, 4)
    assert comm.log == ["Iallgather", "used flags", "check complete", "Iallgather closing",
                        "check complete"]  # fmt: skip
    assert not thread._thread.is_alive()


def test_why_a_rank_cannot_leave():
    assert why_not_leave(None, None) is None
    assert str(why_not_leave(None, "setup (it failed)")) == (
        "sync closed in the middle of setup (it failed)"
    )
    thread = CommThread(reduce)
    failed = Queued(RuntimeError("boom"))
    failed.go.set()
    thread.submit(failed)
    thread.stop()
    assert str(why_not_leave(thread, None)) == (
        "sync closed after allreduce of gradient bucket 0 failed on the communication thread: boom"
    )


@pytest.mark.parametrize("fault", [RuntimeError("an MPI error"), KeyboardInterrupt()])
def test_anything_raised_in_the_last_exchange_aborts_the_job_first(fault):
    """Not only a SyncError: an MPI error or Ctrl-C in the last exchange would otherwise let
    this rank go while the others wait for it."""

    class FailingCheck(StepCheck):
        def say_closed(self, steps, failed=None):
            raise fault

    comm = RecordingComm()
    aborted: list[BaseException] = []
    with pytest.raises(type(fault)):
        leave(FailingCheck(comm), UsedParams(comm, 2, None), None, 0, aborted.append)
    assert aborted == [fault]


class Stopped(Exception):
    """What a script's own stop handler may raise: an Exception (as distconv's Preempted is),
    not a SystemExit."""


def _stopped(signum: int, frame: object) -> None:
    raise Stopped(f"stopped by signal {signum}")


@pytest.mark.parametrize("refused", [False, True])
@pytest.mark.parametrize(
    "signum, handler, stop",
    [
        (signal.SIGINT, signal.default_int_handler, KeyboardInterrupt),
        (signal.SIGTERM, _stopped, Stopped),
    ],
    ids=["ctrl-c", "sigterm-exception"],
)
def test_a_stop_in_the_last_exchange_aborts_only_where_it_was_not_made(
    signum, handler, stop, refused
):
    """A SIGINT as the last exchange waits (for a slower rank) is raised once it is made: every
    rank has left, none waits, so no abort (it aborted the job, exit 130, killing the ranks that
    closed and went on). One with a refusal there still aborts, the Ctrl-C over the refusal.
    So does a SIGTERM (held there too) whose handler raises an Exception, not a SystemExit:
    before, made or not, it aborted the job (exit 1, or its ``exit_status``)."""

    class Interrupted(StepCheck):
        def say_closed(self, steps, failed=None):
            os.kill(os.getpid(), signum)
            time.sleep(0.05)  # the handler runs here, held or not
            super().say_closed(steps, failed)
            if refused:
                raise SyncError("rank 1: at step 3")

    comm = RecordingComm()
    aborted: list[BaseException] = []
    before = signal.signal(signum, handler)  # a runner may hold another
    try:
        with pytest.raises(stop) as raised:
            leave(Interrupted(comm), UsedParams(comm, 2, None), None, 0, aborted.append)
    finally:
        signal.signal(signum, before)
    assert comm.log[-2:] == ["Iallgather closing", "check complete"]  # made
    assert aborted == ([raised.value] if refused else [])
    assert isinstance(raised.value.__context__, SyncError) is refused
