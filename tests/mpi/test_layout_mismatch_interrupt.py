"""A Ctrl-C as the step check names a *layout* mismatch: ``complete`` gathers every rank's
layout and rate (``step_agreement.step_mismatch``: an Allgather, then an Allgatherv, on every
rank) to name the first difference. A SIGINT that came in the first gather (this rank waited
there for a slower one) was raised as it returned: the second was never made here, where every
other rank waits in it (a hang the watchdog or close ended by aborting the job), and the
exchange, marked read before the gathers, was lost: the next ``complete`` returned None, the
step taken for checked. Now the gathers and the refusal are made under the check's hold: the
interrupt is raised once both are made, and the next ``complete`` raises the refusal (once).
In-process: one rank's check with another rank's row and layout given."""

from __future__ import annotations

import json
import os
import signal

import numpy as np
import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi.step_check import StepCheck
from tests.mpi.common import (
    NEEDS_MPIEXEC,
    assert_left_to_the_watchdog,
    run_two_ranks,
    script,
)
from tests.mpi.test_check_interrupt import TwoRanks

#: the other rank's layout (this rank's: {"buckets": [["a", "b"]]})
OTHER = json.dumps({"buckets": [["b", "a"]]}, sort_keys=True).encode()


class LaidOutElsewhere(TwoRanks):
    """Rank 1 at the same step with another layout hash, its layout given in the gathers; a
    SIGINT comes as the first gather returns."""

    def __init__(self, interrupt: bool = True) -> None:
        super().__init__([0, 8, 3])
        self.gathers: list[str] = []
        self.interrupt = interrupt

    def Allgather(self, mine, sizes):  # noqa: N802 - mpi4py's spelling
        self.gathers.append("Allgather")
        sizes[:] = [int(mine[0]), len(OTHER)]
        if self.interrupt:
            os.kill(os.getpid(), signal.SIGINT)  # raised at Python's next check

    def Allgatherv(self, mine, out):  # noqa: N802
        self.gathers.append("Allgatherv")
        out[0][:] = np.concatenate([mine, np.frombuffer(OTHER, dtype=np.uint8)])


def test_an_interrupt_in_the_layout_gathers_is_raised_after_both_and_the_refusal_next():
    comm = LaidOutElsewhere()
    check = StepCheck(comm)
    check.post(0, {"buckets": [["a", "b"]]}, 7, 2)
    with pytest.raises(KeyboardInterrupt):
        check.complete()
    assert comm.gathers == ["Allgather", "Allgatherv"]  # both, as on every other rank
    with pytest.raises(SyncError, match="rank 0 and rank 1 lay out gradient buckets"):
        check.complete()
    assert check.complete() is None  # said once; no gather made again
    assert comm.gathers == ["Allgather", "Allgatherv"]


def test_a_refusal_raised_without_an_interrupt_is_said_once():
    """No Ctrl-C: the refusal is raised at once and not kept (``complete``'s ``except``
    drops it): kept, the next ``complete`` raised it again, and setup's drain of a step
    abandoned so took one more step off ``abandoned_steps`` than ``abandon_step`` had added."""
    comm = LaidOutElsewhere(interrupt=False)
    check = StepCheck(comm)
    check.post(0, {"buckets": [["a", "b"]]}, 7, 2)
    with pytest.raises(SyncError, match="rank 0 and rank 1 lay out gradient buckets"):
        check.complete()
    assert check.complete() is None
    assert comm.gathers == ["Allgather", "Allgatherv"]


def test_a_refusal_left_unraised_is_dropped_by_the_next_step():
    """A step's refusal the next ``complete`` never raised (setup drained the step) is not
    raised at a later step."""
    comm = LaidOutElsewhere()
    check = StepCheck(comm)
    check.post(0, {"buckets": [["a", "b"]]}, 7, 2)
    with pytest.raises(KeyboardInterrupt):
        check.complete()
    comm.other = [1, 7, 3]  # the next step alike on both ranks
    check.post(1, {"buckets": [["a", "b"]]}, 7, 2)
    assert check.complete() == 5


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.timeout(120)
def test_an_interrupt_in_the_layout_gathers_refuses_the_step_on_both_ranks(tmp_path):
    """Real ``mpiexec -n 2`` (``run_layout_interrupt.py``): rank 0 raises the interrupt from
    the layout refusal, rank 1 the refusal, and both close. Before, rank 0 left the gathers
    after the first and sent its flags alone, rank 1 waited in the second until the watchdog
    aborted the job."""
    run_two_ranks("run_layout_interrupt.py", tmp_path)
    said = [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]
    assert said[0].startswith("KeyboardInterrupt"), said[0]
    assert "(from SyncError: step 0: rank 0 and rank 1 lay out gradient buckets" in said[0]
    assert said[1].startswith("SyncError: step 0: rank 1 and rank 0 lay out gradient"), said[1]


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.timeout(60)
def test_a_peer_that_never_reaches_the_layout_gathers_is_left_to_the_watchdog(tmp_path):
    """The hold leaves the gathers' wait as interruptible as before: rank 1 never reaches
    them, rank 0 gets two SIGINTs there (noted, held), and its watchdog (2 s) still stops
    the job, in seconds, naming the first gather."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    args = [*script("run_layout_interrupt.py"), str(tmp_path), "never"]
    assert_left_to_the_watchdog(args, tmp_path, "in Allgather on the job communicator (step 0)")
