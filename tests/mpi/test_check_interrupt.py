"""A KeyboardInterrupt on one rank alone right after its step check's Wait returned (a SIGINT
that arrived while it waited there for a slower rank): the check was completed but not read, so
the interrupted rank lost the step while the others, past the check, sent their pieces and
waited for its own until the watchdog stopped the job (``run_check_interrupt.py``, real
``mpiexec -n 2``)."""

from __future__ import annotations

import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.finishing import Finishing as StepEnd  # MPISync's, below its rate keeping
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.used import UsedParams
from tests.mpi.common import NEEDS_MPIEXEC, assert_moved, run_two_ranks
from tests.unguarded import unguarded

pytestmark = pytest.mark.timeout(120)

#: what the interrupted rank raises
INTERRUPT = "KeyboardInterrupt: Ctrl-C in the step check"


def said(out) -> list[str]:
    """What each rank's step raised."""
    return [(out / f"said{rank}.txt").read_text() for rank in (0, 1)]


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_an_interrupt_in_finish_steps_check_refuses_the_step_on_every_rank(tmp_path, overlap):
    """No bucket went during backward, so ``finish_step`` completes the check: rank 0 raises
    the interrupt once its pieces and flags (marked failed) went, rank 1 refuses the step, and
    the refit trains on alike. Before, rank 0 sent nothing: rank 1 waited in step 0's
    allreduce until the watchdog (20 s) stopped the job."""
    run_two_ranks("run_check_interrupt.py", tmp_path, overlap, "finish")
    assert said(tmp_path)[0] == INTERRUPT
    assert said(tmp_path)[1].startswith("SyncError: another rank's finish_step failed")
    assert_moved(tmp_path, 0.75)  # the refit's step alone: (1 + 2) / 2 examples * lr 0.5


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_in_on_gradients_check_is_drained_by_the_next_setup(tmp_path):
    """The check completed as ``on_gradient`` launched bucket 0: rank 0 abandons the step, and
    its next setup sends what it left (its check had passed on every rank), so rank 1 refuses
    the step at once ("another rank abandoned the step") and both ranks' setups name the step
    one abandoned and the other counted, as after any step abandoned past its check. Before,
    that setup found no check to complete, drained nothing, and met rank 1 nowhere: rank 1
    waited in step 0's allreduce until the watchdog stopped the job."""
    run_two_ranks("run_check_interrupt.py", tmp_path, "0", "launch")
    assert said(tmp_path)[0] == INTERRUPT
    assert said(tmp_path)[1].startswith("SyncError: another rank abandoned the step")
    for rank in (0, 1):
        setup = (tmp_path / f"setup{rank}.txt").read_text()
        assert setup.startswith("JobMismatch: ranks are at different points"), setup
        assert "rank 0 abandoned 1 step that rank 1 counted" in setup, setup


class TwoRanks:
    """A communicator of two ranks, no MPI: the other rank's row of the step check is
    ``other``; every exchange completes at once."""

    def __init__(self, other: list[int]) -> None:
        self.other = other

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's spelling
        return 2

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Iallgather(self, mine, every):  # noqa: N802
        every[0], every[1] = mine, self.other
        return Done()


class Done:
    """A completed request: a Wait on it returns at once (as on an mpi4py one)."""

    def Wait(self) -> None:  # noqa: N802
        pass


class InterruptedOnce(StepCheck):
    """A step check whose first wait is interrupted as it returns (a SIGINT during the Wait)."""

    interrupted = False

    def drain(self) -> bool:
        pending = super().drain()
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt("Ctrl-C")
        return pending


@pytest.mark.parametrize("interrupt", [False, True], ids=["whole", "interrupted"])
def test_a_check_interrupted_as_its_wait_returned_is_read_by_the_next_complete(interrupt):
    """The next ``complete`` returns the examples summed, then None (read once). Before, the
    request was dropped before its Wait: the next call returned None, the step unread."""
    check = (InterruptedOnce if interrupt else StepCheck)(TwoRanks([0, 7, 3]))
    check.post(0, {}, 7, 2)
    if interrupt:
        with pytest.raises(KeyboardInterrupt):
            check.complete()
    assert (check.complete(), check.complete()) == (5, None)


def test_a_mismatch_interrupted_as_its_wait_returned_is_raised_by_the_next_complete():
    """Another rank at another step: the next ``complete`` raises it (once), not None."""
    assert_mismatch_kept_past_the_interrupt(InterruptedOnce(TwoRanks([1, 7, 3])))


def assert_mismatch_kept_past_the_interrupt(check: StepCheck) -> None:
    """``check``, whose ranks differ (this one at step 0, rank 1 at step 1) and which an
    interrupt reaches as it completes: the first ``complete`` raises the interrupt, the next
    the mismatch (once), the one after nothing."""
    check.post(0, {}, 7, 2)
    with pytest.raises(KeyboardInterrupt):
        check.complete()
    with pytest.raises(SyncError, match="rank 0: step 0, rank 1: step 1"):
        check.complete()
    assert check.complete() is None


class RefusedAfterInterrupt:
    """What ``MPISync.finish_step`` reads of a rank of two interrupted in the step check, which
    then fails (another rank is at another step)."""

    world_size, step, sync_seconds, _thread, _in_step, closed = 2, 0, 0.0, None, True, False
    _check_refused = _ended_alike = False
    _check = StepCheck(SingleRankComm())  # no Ctrl-C kept as start_step posted it

    def __init__(self) -> None:
        self._used = UsedParams(None, 2, None)
        self.checks = 0

    def _complete_check(self) -> None:
        self.checks += 1
        if self.checks == 1:
            raise KeyboardInterrupt("Ctrl-C in the step check")
        raise SyncError("ranks are at different points of the job")

    def _launch_ready(self, everything: bool = False) -> None:
        raise AssertionError("no bucket is packed after a failed check")

    _fail_step = MPISync._fail_step  # finish_step's handler of a failed pack, the sync's own


def test_an_interrupt_in_a_failing_check_is_raised_with_nothing_sent():
    """No rank sends a piece after a failed check: the interrupt is raised at once, the
    mismatch its cause, no flag marked failed and the step not counted."""
    sync = RefusedAfterInterrupt()
    with pytest.raises(KeyboardInterrupt) as raised:
        unguarded(StepEnd.finish_step)(sync)
    assert isinstance(raised.value.__cause__, SyncError)
    assert sync.step == 0 and not sync._used.local.any()
    assert sync._ended_alike  # every rank refused it at its first collective: close leaves


class RefusedWithKept(RefusedAfterInterrupt):
    """A rank of two whose ``start_step`` kept a Ctrl-C as it posted the check, which
    ``finish_step`` then finds failed (another rank is at another step)."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 1  # no interrupt in the check's wait: the mismatch at once
        self._check = StepCheck(SingleRankComm())
        self._check.kept = KeyboardInterrupt("Ctrl-C as the check started")


def test_an_interrupt_kept_at_the_check_is_raised_where_the_check_fails():
    """The check refused at ``finish_step`` (every rank alike, nothing sent): the interrupt
    ``start_step`` kept is raised, the mismatch its cause, not the mismatch alone. Before, the
    SyncError went up and the Ctrl-C was dropped (the next ``start_step`` forgot it)."""
    sync = RefusedWithKept()
    with pytest.raises(KeyboardInterrupt, match="as the check started") as raised:
        unguarded(StepEnd.finish_step)(sync)
    assert isinstance(raised.value.__cause__, SyncError)
    assert sync._check.kept is None and not sync._used.local.any()
    assert sync._ended_alike  # every rank refused it at its first collective: close leaves
