"""A Ctrl-C on one rank late in ``finish_step``, where no wait's keeping and no held start
covered it (``run_late_interrupt.py``, real ``mpiexec -n 2``): it is raised once the step's
collectives are done on that rank as on the other, and both close cleanly."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from distconv.sync.mpi import SingleRankComm
from distconv.sync.mpi.collectives import RankCollectives
from tests.mpi.common import NEEDS_MPIEXEC, run_two_ranks
from tests.mpi.test_start_interrupt import assert_interrupt_over_a_failed_pack

pytestmark = pytest.mark.timeout(60)


def _said(tmp_path, *args: str) -> list[str]:
    """What each rank's run of ``run_late_interrupt.py`` with ``args`` said its step raised."""
    run_two_ranks("run_late_interrupt.py", tmp_path, *args)
    return [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["Allgather", "Allgatherv"])
def test_an_interrupt_in_the_firing_orders_exchange_leaves_the_step_over(tmp_path, where):
    """Rank 0 interrupted as a collective of the first step's firing-order exchange returned
    (a Ctrl-C while it waited there for rank 1: step 0's likeliest moment for one): it is held
    until the order is recorded, then raised; rank 1 finishes the step and both close cleanly.
    Before, it went up there: after the ``Allgather``, rank 0 never made the ``Allgatherv``
    rank 1 waited in; after the ``Allgatherv``, the order went unrecorded and the step stayed
    open; either way rank 0's close aborted the job ("sync closed in the middle of step 0")."""
    assert _said(tmp_path, where) == ["KeyboardInterrupt: ", "nothing"]
    assert not list(tmp_path.glob("rank*.err"))


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_an_interrupt_in_the_handler_of_a_failed_pack_is_said_in_the_flags(tmp_path):
    """Rank 0's pack of a bucket fails in ``finish_step`` and a Ctrl-C comes as its handler
    begins: kept as what rank 0 raises (the pack's error its context), its flags still say
    the failure, so rank 1 refuses the step and both close cleanly. Before, it went up from
    the handler: rank 0 never started the flags nor sent its last pieces, which rank 1 waited
    for, and rank 0's close aborted the job."""
    said = _said(tmp_path, "pack")
    assert_interrupt_over_a_failed_pack(said, tmp_path)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("where", ["reduce", "thread-reduce"])
def test_an_interrupt_between_the_last_pieces_and_the_reduction_fails_the_step_there(
    tmp_path, where
):
    """Rank 0 interrupted once its last pieces went, before the step's reduction began (no
    wait's keeping, no start held): kept as a wait's, the reduction and the flags completed
    as on rank 1, then raised (the step failed there alone); rank 1 finishes the step and
    both close cleanly. Before, it went up at once: rank 1 waited in collectives rank 0 never
    completed, and rank 0's close aborted the job."""
    assert _said(tmp_path, where) == ["KeyboardInterrupt: ", "nothing"]
    assert not list(tmp_path.glob("rank*.err"))


class InterruptedGather(SingleRankComm):
    """One rank whose ``Allgather`` is met by a SIGINT (this process) as it returns."""

    def Allgather(self, send: Any, recv: Any) -> None:  # noqa: N802 - mpi4py's spelling
        super().Allgather(send, recv)
        os.kill(os.getpid(), signal.SIGINT)  # its handler runs at Python's next check


class FailedAlone:
    """What ``_note_failed_step`` reads of a sync in its first step, failed on this rank alone
    (every collective of the step in)."""

    step, _failed_finish, _recorded, _first_pass = 0, None, (), ["b", "a"]
    comm = InterruptedGather()
    _record_first_pass = RankCollectives._record_first_pass


def test_a_failure_alone_is_told_where_the_firing_orders_exchange_meets_a_ctrl_c():
    """The Ctrl-C held through the first step's firing-order exchange is raised once the order
    is recorded, and the step is still marked failed here (told at this rank's next call, its
    close leaves cleanly): a rank that raised before marking it closed as one with a step
    neither over nor told, and aborted the job."""
    sync = FailedAlone()
    with pytest.raises(KeyboardInterrupt):
        RankCollectives._note_failed_step(sync)  # type: ignore[arg-type]
    assert sync._recorded == ("b", "a") and sync._failed_finish == 0
