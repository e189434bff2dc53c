"""A bucket that fails to pack in ``finish_step`` on one rank alone (its parameters fired on no
rank, so it goes at the step's end): the other ranks waited for its pieces, never sent, until
that rank's close aborted the job or the watchdog stopped it."""

from __future__ import annotations

import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.mpi.finishing import Finishing
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.used import UsedParams
from distconv.sync.mpi.watchdog import Watchdog
from tests.mpi.common import (
    NEEDS_MPIEXEC,
    assert_moved,
    run_mpi,
    run_two_ranks,
    script,
)
from tests.unguarded import unguarded

pytestmark = pytest.mark.timeout(120)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("wire", [[], ["float16"]], ids=["native", "float16"])
def test_a_pack_failing_on_one_rank_refuses_the_step_on_every_rank(tmp_path, overlap, wire):
    """Every rank refuses the step, none updates (rank 0 naming its own error, rank 1 that
    another rank's finish_step failed), and the refit that follows trains on alike."""
    run_two_ranks("run_pack_failure.py", tmp_path, overlap, *wire)
    said = [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]
    assert said[0] == "RuntimeError: copying bucket 1 to the host failed", said
    assert said[1].startswith("SyncError: another rank's finish_step failed"), said
    assert_moved(tmp_path, 0.75)  # the last step alone: (1 + 2) / 2 examples * lr 0.5


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_an_interrupt_in_the_last_pack_is_raised_once_the_pieces_went(tmp_path, overlap):
    """A KeyboardInterrupt (not an Exception) in that pack on rank 0 alone: rank 0 raises it
    once its pieces and flags went, rank 1 refuses the step, and the refit trains on alike.
    Before, rank 0 raised it at once and sent nothing: rank 1 waited in the gradients'
    allreduce, rank 0 in the refit's setup, until the watchdog stopped the job."""
    run_two_ranks("run_pack_failure.py", tmp_path, overlap, "--interrupt")
    said = [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]
    assert said[0] == "KeyboardInterrupt: copying bucket 1 to the host failed", said
    assert said[1].startswith("SyncError: another rank's finish_step failed"), said
    assert_moved(tmp_path, 0.75)


def test_an_interrupt_kept_wins_over_a_later_refusal():
    """An interrupt kept from the last pack (:meth:`UsedParams.fail`) is not turned into a
    note on a refusal raised first on every rank: it is raised, the refusal its context."""
    used = UsedParams(None, 2, None)
    used.fail(KeyboardInterrupt("stop"), world_size=2)
    with pytest.raises(KeyboardInterrupt) as raised:
        try:
            raise SyncError("bucket 0 (b) is not finite")
        except SyncError as refusal:
            used.note_unsaid(refusal)
    assert isinstance(raised.value.__context__, SyncError)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_a_later_refusal_on_every_rank_still_names_the_failed_pack(tmp_path):
    """With the thread, ``b``'s bucket (first on the wire) is refused on every rank (its
    average is past float16's range) before the flags are in: that refusal is what every rank
    raises, and rank 0's failed pack of ``a``'s bucket goes with it, not lost. (Each rank's
    close then aborts the job, as after any failure on the thread.)"""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    args = [str(tmp_path), "1", "float16", "2e5"]
    run_mpi(["-n", "2", *script("run_pack_failure.py"), *args], timeout=90)
    said = [(tmp_path / f"said{rank}.txt").read_text().splitlines() for rank in (0, 1)]
    assert all("bucket 0 (b) is not finite" in lines[0] for lines in said), said
    assert "copying bucket 1 to the host failed" in "\n".join(said[0][1:]), said
    assert len(said[1]) == 1, said  # rank 1 packed its buckets


class FailingStart(UsedParams):
    """The flags' exchange, whose start (without the thread, on the main thread) raises."""

    def _start(self) -> None:
        raise RuntimeError("MPI_Iallreduce: an error of the library")


class Interrupted:
    """What Finishing.finish_step (MPISync's step end, below its rate keeping) reads of its
    sync, up to the flags' start: a rank of two whose last pack is interrupted."""

    world_size, step, sync_seconds, _thread, _in_step, closed = 2, 0, 0.0, None, True, False
    _failed_finish, _ended_alike, _check_refused = None, False, False
    grad_hook, _total = None, 0  # no hook
    _watchdog = Watchdog(None, print, 0)  # watches nothing
    _check = StepCheck(SingleRankComm())  # no Ctrl-C kept as start_step posted it
    _pump = None  # handed to send_last with the flags: never reached, their start raises
    _grad_comm, buckets, _slot, _apply, _note_failed_step = None, (), {}, None, None  # nor these

    def __init__(self) -> None:
        self._used = FailingStart(None, 2, None)

    def _complete_check(self) -> None:
        pass

    def _launch_ready(self, everything: bool = False) -> None:
        raise KeyboardInterrupt("second Ctrl-C")

    _fail_step = MPISync._fail_step  # finish_step's handler of a failed pack, the sync's own


def test_an_error_starting_the_flags_does_not_lose_an_interrupt_kept_from_the_pack():
    """The interrupt kept from the last pack (:meth:`UsedParams.fail`) is raised even where
    starting the flags' exchange raises first (an MPI error): before, that start was outside
    the handler that raises it (``note_unsaid``), so the error went up and the interrupt was
    dropped."""
    sync = Interrupted()
    with pytest.raises(KeyboardInterrupt) as raised:
        unguarded(Finishing.finish_step)(sync)
    assert isinstance(raised.value.__context__, RuntimeError) and sync.step == 1
    assert not sync._ended_alike  # the flags never went: close aborts the job


class Quiet(UsedParams):
    """The flags' exchange, whose start does nothing (no MPI)."""

    def _start(self) -> None:
        pass


class InterruptedPump:
    """The last pieces' hand-over, reached by a Ctrl-C (no piece on the wire; every time:
    the first kept by send_last, the hand-over made again, the second raised)."""

    request, starting = None, False

    def finish(self) -> None:
        raise KeyboardInterrupt("Ctrl-C")


class FailedPack(Interrupted):
    """A rank of two whose last pack fails with an error, then a Ctrl-C comes before the flags
    raise it."""

    def __init__(self) -> None:
        self._used, self._pump = Quiet(None, 2, None), InterruptedPump()

    def _launch_ready(self, everything: bool = False) -> None:
        raise RuntimeError("copying bucket 1 to the host failed")


def test_an_interrupt_before_the_flags_names_an_error_kept_from_the_pack():
    """A pack's error kept for the flags (:meth:`UsedParams.fail`), then a Ctrl-C before they
    raise it: the interrupt goes up, the kept error named in a note on it, not dropped."""
    sync = FailedPack()
    with pytest.raises(KeyboardInterrupt) as raised:
        unguarded(Finishing.finish_step)(sync)
    assert any("copying bucket 1 to the host failed" in n for n in raised.value.__notes__)
    assert sync.step == 1 and not sync._ended_alike  # the flags never read: close aborts
