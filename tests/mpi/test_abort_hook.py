"""The exception hook MPISync installs: print the error, then abort the whole job, always."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm, leaving, shutdown
from distconv.sync.mpi import comm as comm_mod
from distconv.sync.mpi.comm import want_thread
from distconv.sync.mpi.leaving import abort_job, install_abort_hook, is_abort_hook, reason
from distconv.sync.mpi.step_check import BARRIER, CLOSED, SETUP, SUMMING, StepCheck
from tests.mpi.common import AbortRecorder


@pytest.fixture(autouse=True)
def exits(monkeypatch):
    """The statuses the abort path would end the process with, should Abort return (the
    stand-ins' Abort does; MPICH's can, when ranks abort at once)."""
    seen: list[int] = []
    monkeypatch.setattr(leaving, "_exit", seen.append)
    monkeypatch.setattr(leaving, "FORWARD_SECONDS", 0.0)  # no launcher forwards the output
    return seen


def _raise_and_hook(error: BaseException) -> None:
    try:
        raise error
    except BaseException:
        sys.excepthook(*sys.exc_info())


def test_abort_flushes_and_lets_the_launcher_forward_before_it_ends_the_job(monkeypatch):
    """Hydra ends every rank at the Abort and lost the rank's last line, not yet forwarded
    (2 runs in 54 of test_lifecycle's exit case on a loaded machine): what the rank wrote is
    flushed, and given FORWARD_SECONDS, before the Abort."""
    events: list[str] = []

    class Stream:
        def __init__(self, name: str) -> None:
            self.name = name

        def flush(self) -> None:
            events.append(f"flush {self.name}")

    class Comm:
        def Abort(self, code: int) -> None:  # noqa: N802 - mpi4py's name
            events.append(f"Abort {code}")

    monkeypatch.setattr(sys, "stdout", Stream("stdout"))
    monkeypatch.setattr(sys, "stderr", Stream("stderr"))
    monkeypatch.setattr(leaving, "FORWARD_SECONDS", 0.25)
    monkeypatch.setattr(
        leaving, "time", types.SimpleNamespace(sleep=lambda s: events.append(f"sleep {s}"))
    )
    leaving.abort(Comm(), 3)
    assert events == ["flush stdout", "flush stderr", "sleep 0.25", "Abort 3"]


@pytest.mark.timeout(30)
def test_a_ctrl_c_in_the_pause_before_abort_still_aborts(monkeypatch, exits):
    """A second Ctrl-C (KeyboardInterrupt) while the rank waited for the launcher to forward
    its last lines left ``abort`` before the Abort: the hook failed, the rank exited, and the
    other ranks waited in their collective for ever (mpiexec -n 2 hung)."""
    aborted: list[int] = []

    class Comm:
        def Abort(self, code: int) -> None:  # noqa: N802 - mpi4py's name
            aborted.append(code)

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(leaving, "time", types.SimpleNamespace(sleep=interrupted))
    with pytest.raises(KeyboardInterrupt):  # only since the stand-in _exit returns
        leaving.abort(Comm(), 3)
    assert aborted == [3] and exits == [3]


def test_the_hook_prints_the_whole_error_then_aborts(capsys, monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    comm = AbortRecorder()
    restore = install_abort_hook(comm)
    _raise_and_hook(ValueError("rank 1 fails on purpose"))
    restore()
    assert sys.excepthook is sys.__excepthook__
    assert comm.aborted == [1]
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "ValueError: rank 1 fails on purpose" in err


def test_hooks_restored_out_of_order_abort_no_more(capsys, monkeypatch):
    """Two syncs of one process, the first closed first: its hook stayed under the second's,
    which put it back at its own close, so a later error aborted a job both had left."""
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    first, second = AbortRecorder(), AbortRecorder()
    restore_first = install_abort_hook(first)
    restore_second = install_abort_hook(second)
    restore_first()  # not the installed one: left in place, but told it is closed
    _raise_and_hook(ValueError("while the second is open"))
    assert second.aborted == [1] and first.aborted == []
    restore_second()
    _raise_and_hook(ValueError("after both closed"))
    assert second.aborted == [1] and first.aborted == []
    assert "ValueError: after both closed" in capsys.readouterr().err


class _RemovalInterrupted(list):
    """``_open_hooks`` where a Ctrl-C comes as the first hook closed is taken off the list."""

    interrupted = False

    def remove(self, hook: object) -> None:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        super().remove(hook)


def test_a_ctrl_c_as_the_hook_is_closed_leaves_it_closed(capsys, monkeypatch):
    """Closing took the hook off the open list before it marked it closed: a Ctrl-C between
    the two left it installed, marked and aborting, an error run_main then left to it aborting
    a job every rank had left. Only a marked hook counts open, and the rest of
    the close (closed, unmarked, the previous hook back) is made however the removal ended: no
    second close comes to finish it (``closes_once``)."""
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    monkeypatch.setattr(leaving, "_open_hooks", _RemovalInterrupted())
    comm = AbortRecorder()
    restore = install_abort_hook(comm)
    with pytest.raises(KeyboardInterrupt):
        restore()
    assert sys.excepthook is sys.__excepthook__  # put back, though the removal failed
    assert not leaving.is_abort_hook(leaving._open_hooks[0])  # listed, unmarked: not open
    assert leaving.abort_through_open_hook(ValueError("after the close")) is False
    _raise_and_hook(ValueError("after the close"))
    assert comm.aborted == [] and "ValueError: after the close" in capsys.readouterr().err
    restore()
    assert sys.excepthook is sys.__excepthook__ and not leaving._open_hooks


def test_the_job_aborts_even_when_printing_fails(monkeypatch):
    def broken_hook(*args):
        raise OSError("stderr is gone")

    monkeypatch.setattr(sys, "excepthook", broken_hook)
    comm = AbortRecorder()
    restore = install_abort_hook(comm)
    with pytest.raises(OSError, match="stderr is gone"):
        _raise_and_hook(ValueError("boom"))
    restore()
    assert comm.aborted == [1]


def test_a_scripts_hook_that_raises_is_guarded_then_the_job_aborts(monkeypatch):
    """run_main hands an error to the hook a script set over ours under the last
    resort, which a hook that blocks cannot outlast, and aborts the job even where it raises."""
    events: list[str] = []

    class Timer:
        def cancel(self) -> None:
            events.append("disarmed")

    def broken(*exc: object) -> None:
        events.append("script's hook")
        raise OSError("the log is gone")

    monkeypatch.setattr(leaving, "last_resort", lambda: events.append("armed") or Timer())
    comm = AbortRecorder()
    restore = install_abort_hook(comm)
    monkeypatch.setattr(sys, "excepthook", broken)
    try:
        with pytest.raises(OSError):  # only since the stand-in Abort returns
            leaving.abort_through_open_hook(ValueError("rank 1 fails on purpose"))
    finally:
        restore()
    assert events[:2] == ["armed", "script's hook"] and comm.aborted == [1]


class FakeGather:
    """A two-rank ``Iallgather`` whose other rank sends ``theirs``."""

    def __init__(self, theirs: list[int]) -> None:
        self.theirs = theirs

    def Get_size(self) -> int:  # noqa: N802
        return 2

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Iallgather(self, mine, every):  # noqa: N802
        every[0], every[1] = mine, self.theirs
        return type("Done", (), {"Wait": lambda self: None})()


def test_ranks_at_different_steps_are_named():
    check = StepCheck(FakeGather([2, 7, 8]))
    check.post(1, {"bucket 0": []}, 7, 8)
    with pytest.raises(
        SyncError, match=r"different points of the job \(rank 0: step 1, rank 1: step 2\)"
    ):
        check.complete()
    assert not check.pending


def test_agreeing_ranks_sum_their_examples():
    check = StepCheck(FakeGather([3, 7, 5]))
    check.post(3, {"bucket 0": []}, 7, 8)
    assert check.pending and check.complete() == 13 and check.complete() is None


def test_a_meeting_passes_where_every_rank_says_the_same():
    check = StepCheck(FakeGather([SUMMING, 4, 2]))
    check.meet(SUMMING, 4, 2)
    assert not check.pending


@pytest.mark.parametrize(
    ("theirs", "named"),
    [
        ([SUMMING, 4, 3], "rank 1: summing 3 values after 4 steps"),  # another count
        ([SUMMING, 5, 2], "rank 1: summing 2 values after 5 steps"),  # after another step
        ([4, 77, 8], "rank 1: step 4"),  # a step, its layout hash and examples
        ([BARRIER, 1, 0], "rank 1: at the barrier after 1 step"),
        ([SETUP, 0, 0], "rank 1: comparing the job (setup's check) after 0 steps"),
        ([CLOSED, 4, 0], "rank 1: closed after 4 steps"),
        ([CLOSED, 4, 3], "rank 1: closed after 4 steps (its finish_step of step 2 failed)"),
        ([-9, 4, 0], "rank 1: unknown code -9"),
    ],
)
def test_a_meeting_names_what_each_rank_is_doing_where_any_differs(theirs, named):
    check = StepCheck(FakeGather(theirs))
    with pytest.raises(SyncError) as raised:
        check.meet(SUMMING, 4, 2)
    mine = "rank 0: summing 2 values after 4 steps"
    said = f"ranks are at different points of the job ({mine}, {named})"
    assert str(raised.value).startswith(said)
    assert ("a rank closed its sync" in str(raised.value)) == (theirs[0] == CLOSED)


@pytest.mark.parametrize(("mine", "theirs"), [(2, 0), (None, 3), (2, 3)])
def test_ranks_that_all_close_agree_whichever_says_a_step_failed_on_it_alone(mine, theirs):
    """The closing rows' count column (1 + a step that failed on that rank alone) names it to a
    rank that went on; ranks that all close after as many steps leave cleanly whatever each
    says there."""
    StepCheck(FakeGather([CLOSED, 4, theirs])).say_closed(4, failed=mine)
    with pytest.raises(SyncError, match=r"rank 0: closed after 4 steps, rank 1: closed after 5"):
        StepCheck(FakeGather([CLOSED, 5, theirs])).say_closed(4)


def test_no_exchange_starts_while_one_is_pending():
    """It would write over buffers MPI still owns, and drop the request: MPISync completes a
    step's check before the next step or a meeting."""
    check = StepCheck(FakeGather([3, 7, 5]))
    check.post(3, {}, 7, 8)
    with pytest.raises(SyncError, match=r"no exchange \(summing 1 value after 3 steps\) while st"):
        check.meet(SUMMING, 3, 1)
    with pytest.raises(SyncError, match=r"no exchange \(step 4\) while step 3's check is open"):
        check.post(4, {}, 7, 8)
    assert check.complete() == 13  # the pending one, untouched


def test_abort_job_says_why_then_aborts(capsys, exits):
    comm = AbortRecorder()
    abort_job(comm, 1, ValueError("bad batch"))
    assert comm.aborted == [1]
    assert exits == [1]  # had Abort returned, the process would end here all the same
    assert capsys.readouterr().err == "rank 1: ValueError: bad batch; aborting the MPI job\n"


def test_abort_job_prints_where_a_raised_error_came_from(capsys, exits):
    """Closing the sync in a ``finally`` aborts before the except hook could print the
    traceback, so the abort prints it (one write), then the one-line reason."""

    def fails() -> None:
        raise ValueError("bad batch")

    try:
        fails()
    except ValueError as raised:
        error = raised
    abort_job(AbortRecorder(), 1, error)
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):\n")
    assert 'in fails\n    raise ValueError("bad batch")\nValueError: bad batch\n' in err
    assert err.endswith("rank 1: ValueError: bad batch; aborting the MPI job\n")


def test_a_brief_error_that_wraps_a_bug_keeps_the_bugs_traceback(capsys, exits, monkeypatch):
    """``distconv train``'s user errors abort on one line, but a SyncError the communication
    thread raised from a bug in a reduction (here a TypeError) is no user's error: without
    the traceback the bug's type and place are gone (the message keeps only its text)."""
    from distconv.sync.mpi.thread import CommThread
    from distconv.user_errors import user_errors

    monkeypatch.delenv("DISTCONV_DEBUG", raising=False)
    monkeypatch.setattr(leaving, "BRIEF_ERRORS", user_errors())

    def buggy_reduction(wait) -> None:
        raise TypeError("unsupported operand type(s) for +=: 'float' and 'NoneType'")

    thread = CommThread(lambda *args: None)
    try:
        thread.finish(thread.call(buggy_reduction, "a reduction"))
    except SyncError as raised:
        wrapped = raised
    finally:
        thread.stop()
    abort_job(AbortRecorder(), 1, wrapped)
    err = capsys.readouterr().err
    assert "in buggy_reduction" in err and "TypeError: unsupported operand" in err, err
    assert err.endswith(
        "failed on the communication thread: unsupported operand type(s) for "
        "+=: 'float' and 'NoneType'; aborting the MPI job\n"
    )
    try:  # one the user can act on, raised from nothing else: one line still
        raise SyncError("sync closed in the middle of step 3")
    except SyncError as raised:
        alone = raised
    abort_job(AbortRecorder(), 1, alone)
    assert capsys.readouterr().err == (
        "rank 1: SyncError: sync closed in the middle of step 3; aborting the MPI job\n"
    )


def test_abort_job_aborts_even_when_stderr_is_gone(monkeypatch):
    class Gone:
        def write(self, text):
            raise OSError("stderr is gone")

    monkeypatch.setattr(sys, "stderr", Gone())
    comm = AbortRecorder()
    with pytest.raises(OSError, match="stderr is gone"):
        abort_job(comm, 0, RuntimeError("boom"))
    assert comm.aborted == [1]


class EventComm(SingleRankComm):
    """One rank whose Abort is noted in ``events`` instead of ending the process."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def Abort(self, code: int = 1) -> None:  # noqa: N802
        self.events.append(f"Abort({code})")


class StopRecorder:
    """Stands in for the communication thread (joining it may take up to 30 s); stopping it
    twice does nothing, as with the real one."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.error = None  # no reduction failed
        self.stopped = False

    def stop(self) -> None:
        if not self.stopped:
            self.events.append("thread stopped")
        self.stopped = True


def test_close_aborts_before_it_joins_the_thread_when_an_exception_propagates(capsys):
    events: list[str] = []
    sync = MPISync(create_optimizer("sgd"), comm=EventComm(events), overlap=False)
    sync.setup([Parameter("w", np.zeros(3))], {})
    sync.world_size = 2  # as if another rank waited in a collective for this one
    sync._thread = StopRecorder(events)
    try:
        raise RuntimeError("rank 0 fails")
    except RuntimeError:
        sync.close()
    assert events == ["Abort(1)", "thread stopped"]
    assert "rank 0: RuntimeError: rank 0 fails; aborting the MPI job" in capsys.readouterr().err


def test_close_aborts_when_its_last_exchange_finds_a_rank_still_at_a_step(capsys, exits):
    """Raised after the hook is put back, the error could be caught (or run without
    ``-m mpi4py``) and leave the rank still at a step waiting: the job is aborted first."""
    events: list[str] = []
    sync = MPISync(create_optimizer("sgd"), comm=EventComm(events), overlap=False)
    sync.setup([Parameter("w", np.zeros(3))], {})
    sync.world_size = 2

    def still_at_a_step(steps: int, failed: int | None = None) -> None:
        raise SyncError(
            "ranks are at different points of the job "
            f"(rank 0: closed after {steps} steps, rank 1: step 3)"
        )

    sync._check.say_closed = still_at_a_step
    with pytest.raises(SyncError, match="ranks are at different points"):
        sync.close()
    assert events == ["Abort(1)"] and exits == [1]
    assert (
        "rank 0: SyncError: ranks are at different points of the job (rank 0: closed after 0 steps"
        in capsys.readouterr().err
    )


def test_close_without_an_exception_does_not_abort():
    events: list[str] = []
    sync = MPISync(create_optimizer("sgd"), comm=EventComm(events), overlap=False)
    sync.setup([Parameter("w", np.zeros(3))], {})
    sync.world_size = 2
    sync._thread = StopRecorder(events)
    sync.close()
    assert events == ["thread stopped"]


@pytest.mark.timeout(10)
@pytest.mark.parametrize("fails", ["_close_gradients", "_let_go"])
def test_close_puts_the_hook_back_when_releasing_the_sync_raises(fails, monkeypatch):
    """A Ctrl-C or an MPI error (the communicator's Free) while close released the sync skipped
    putting the hook back: it stayed installed and open, and a later error on this rank (a
    second fit's refusal, a Ctrl-C) aborted a job every rank had left."""
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), overlap=False)
    sync.setup([Parameter("w", np.zeros(3))], {})
    sync._restore_hook = install_abort_hook(AbortRecorder())  # as with two ranks or more

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(sync, fails, interrupted)
    with pytest.raises(KeyboardInterrupt):
        sync.close()
    assert sys.excepthook is sys.__excepthook__
    assert not leaving.is_abort_hook(sys.excepthook) and not leaving._open_hooks


@pytest.mark.timeout(10)
def test_a_close_interrupted_after_leaving_does_not_leave_again(monkeypatch):
    """A Ctrl-C in close's release, after leave() made the last exchange, leaves the gradients'
    communicator set: a second close (a Trainer's, then the script's ``finally``) that ran
    leave() again would wait in a last exchange the other ranks, gone, never join, maybe with
    the watchdog already closed. The sync counts closed once a close has run
    (``closes_once``): the second does nothing."""
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm(), overlap=False)
    sync.setup([Parameter("w", np.zeros(3))], {})
    left: list[object] = []
    monkeypatch.setattr(shutdown, "leave", lambda *args: left.append(args))
    let_go = sync._let_go

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(sync, "_let_go", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            sync.close()
        assert len(left) == 1 and sync._grad_comm is not None  # left, not yet released
        monkeypatch.setattr(sync, "_let_go", let_go)  # no Ctrl-C this time
        sync.close()
        assert len(left) == 1
    finally:  # what the interrupted release skipped: nothing outlives the test
        let_go()
        sync._watchdog.close()
        sync._close_gradients()


#: an MPI initialised at FUNNELED, below SERIALIZED: no second thread may call it
FUNNELED = types.SimpleNamespace(Query_thread=lambda: 1, THREAD_SERIALIZED=2)


@pytest.mark.parametrize(
    "requested, world, on_gpu, cores, busy, mpi, expected",
    [
        (None, 1, True, 8, 1, None, False),  # one rank: nothing to overlap
        (None, 2, False, 2, 2, None, False),  # the ranks' kernel threads fill the cores
        (None, 2, False, 4, 2, None, True),  # a core to spare for each rank's thread
        (None, 2, False, 4, 4, None, False),  # two ranks of two kernel threads on four cores
        (None, 2, True, 2, 2, None, True),  # compute on a GPU leaves the cores free
        (True, 2, False, 2, 2, None, True),  # asked for: granted
        (False, 2, True, 8, 1, None, False),  # refused: never
        (True, 2, True, 8, 1, FUNNELED, False),  # below SERIALIZED: never
        (None, 2, True, 8, 1, FUNNELED, False),
    ],
)
def test_want_thread(requested, world, on_gpu, cores, busy, mpi, expected):
    assert want_thread(requested, world, on_gpu, cores, busy, mpi) is expected


class _TwoRanks:
    """What thread_poll_seconds asks of a communicator, for two ranks that agree."""

    def Get_size(self):  # noqa: N802 - mpi4py's spelling
        return 2

    def Allreduce(self, send, recv, op):  # noqa: N802
        pass


@pytest.mark.parametrize(
    "kernel_threads, on_gpu, expected",
    [
        ("2", False, None),  # 2 ranks x 2 kernel threads fill the 4 cores: no thread
        ("1", False, comm_mod.POLL_SECONDS),  # set by hand: a thread that polls, never spins
        ("2", True, comm_mod.POLL_SECONDS),  # GPU gradients (kernels idle), set by hand
        (None, False, None),  # unset: the 4 cores shared by mpiexec's 2 ranks, 2 each
    ],
)
def test_the_thread_counts_the_ranks_kernel_threads_as_busy_cores(
    monkeypatch, kernel_threads, on_gpu, expected
):
    from distconv.kernels import parallel
    from distconv.sync.mpi import comm

    monkeypatch.setattr(comm, "ranks_on_node", lambda c, m: 2)
    monkeypatch.setattr(comm, "usable_cores", lambda: 4)
    monkeypatch.setattr(parallel, "usable_cores", lambda: 4)
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")
    if kernel_threads is None:
        monkeypatch.delenv("DISTCONV_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("DISTCONV_NUM_THREADS", kernel_threads)
    assert comm.thread_poll_seconds(None, _TwoRanks(), None, on_gpu, None) == expected


@pytest.mark.parametrize(
    "cores, kernel_threads, on_gpu, expected",
    [
        (5, None, False, comm_mod.POLL_SECONDS),  # 2 kernel threads each, 1 core left for 2
        (7, None, False, comm_mod.POLL_SECONDS),  # ranks' threads: no spinning
        (6, "2", False, comm_mod.POLL_SECONDS),  # set by hand: the 2 cores left may be
        (4, "1", False, comm_mod.POLL_SECONDS),  # another job's: a thread that never spins
        (4, "8", True, comm_mod.POLL_SECONDS),  # GPU, set by hand: polls
        (4, None, True, 0.0),  # GPU: each rank busy on one core, two left
        (3, "1", True, comm_mod.POLL_SECONDS),
    ],
)
def test_the_thread_waits_in_mpi_wait_only_with_a_core_left_for_each_ranks_thread(
    monkeypatch, cores, kernel_threads, on_gpu, expected
):
    """Spare cores are those the ranks' kernel threads leave, not the cores over the ranks:
    2 ranks x 2 kernel threads on 5 cores leave one core, where two threads spinning in
    MPI_Wait would take cores from the kernels."""
    from distconv.kernels import parallel

    monkeypatch.setattr(comm_mod, "ranks_on_node", lambda c, m: 2)
    monkeypatch.setattr(comm_mod, "usable_cores", lambda: cores)
    monkeypatch.setattr(parallel, "usable_cores", lambda: cores)
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")
    if kernel_threads is None:  # sized from the cores: 5 // 2 ranks, 7 // 2
        monkeypatch.delenv("DISTCONV_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("DISTCONV_NUM_THREADS", kernel_threads)
    assert comm_mod.thread_poll_seconds(None, _TwoRanks(), None, on_gpu, None) == expected


@pytest.mark.parametrize(
    "cores, kernel_threads, on_gpu",
    [
        (4, "2", False),  # 2 ranks x 2 kernel threads fill the 4 cores
        (2, "1", False),  # the benchmark's forced-on rows on 2 cores
        (2, "1", True),  # GPU: the 2 ranks' own cores are all there is
        (3, "4", False),  # more kernel threads than cores
    ],
)
def test_a_thread_asked_for_where_compute_fills_the_cores_polls(
    monkeypatch, cores, kernel_threads, on_gpu
):
    """overlap=True with no core left over: the thread gets one, polling, never spinning in
    MPI_Wait on a core the kernels compute on."""
    monkeypatch.setattr(comm_mod, "ranks_on_node", lambda c, m: 2)
    monkeypatch.setattr(comm_mod, "usable_cores", lambda: cores)
    monkeypatch.setenv("DISTCONV_NUM_THREADS", kernel_threads)
    got = comm_mod.thread_poll_seconds(True, _TwoRanks(), None, on_gpu, None)
    assert got == comm_mod.POLL_SECONDS


@pytest.mark.parametrize(
    ("said", "line"),
    [
        ("the job cannot go on.", "the job cannot go on"),  # not ".; aborting"
        ("the job cannot go on", "the job cannot go on"),
        ("waited 600 s in Wait ...", "waited 600 s in Wait ..."),  # an ellipsis stays
        ("trailing space. ", "trailing space"),
    ],
)
def test_the_reason_drops_an_errors_own_full_stop(said, line):
    assert reason(1, SyncError(said), "aborting the MPI job") == (
        f"rank 1: SyncError: {line}; aborting the MPI job\n"
    )


@pytest.mark.parametrize("error", [KeyboardInterrupt(), SyncError(""), SyncError(" ")])
def test_an_error_without_a_message_is_named_alone(error):
    """Ctrl-C's ``KeyboardInterrupt`` has no message: the line read ``KeyboardInterrupt: ;``."""
    name = type(error).__name__
    assert reason(1, error, "aborting the MPI job") == f"rank 1: {name}; aborting the MPI job\n"


@pytest.mark.parametrize("value, brief", [("0", True), ("false", True), ("1", False)])
def test_distconv_debug_off_values_keep_the_abort_line_brief(
    capsys, exits, monkeypatch, value, brief
):
    """The MPI abort reads ``DISTCONV_DEBUG`` as the commands do: ``0`` or ``false`` is off (the
    one line), anything else shows the traceback (``false`` showed it)."""
    from distconv.user_errors import user_errors

    monkeypatch.setenv("DISTCONV_DEBUG", value)
    monkeypatch.setattr(leaving, "BRIEF_ERRORS", user_errors())
    try:
        raise SyncError("sync closed in the middle of step 3")
    except SyncError as raised:
        abort_job(AbortRecorder(), 1, raised)
    err = capsys.readouterr().err
    assert ("Traceback (most recent call last)" not in err) is brief, err
    assert err.endswith("sync closed in the middle of step 3; aborting the MPI job\n")


def test_a_hook_wrapping_ours_is_not_ours():
    """``functools.wraps(ours)`` copies the open hook's mark: a script's logger made so was
    taken for the abort hook (run_main left it the error, and this rank ended alone while the
    others waited), and after close still (its copy never cleared). Ours is told by identity."""
    import functools

    close = install_abort_hook(AbortRecorder())
    try:
        ours = sys.excepthook
        wrapped = functools.wraps(ours)(lambda *exc: None)
        assert is_abort_hook(ours) and not is_abort_hook(wrapped)
    finally:
        close()
    assert not is_abort_hook(ours) and not is_abort_hook(wrapped)
