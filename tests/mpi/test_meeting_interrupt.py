"""A Ctrl-C on one rank as a meeting between steps waits for a slower rank in its exchange
(``run_meeting_interrupt.py``, real ``mpiexec -n 2``, a real SIGINT): raised as that Wait
returned, it left the exchange pending on that rank and the meeting's own collectives (the
sum's Allreduce, the broadcast's, the job compare's gathers) unmade, which the other rank waited
in. A rank that caught it and went on was refused at its next step ("no exchange (step 0) while
step 0's check is open", a step check long over) and its close aborted the job. Now the
meeting is made to its end, then the interrupt raised: both ranks go on alike."""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import (
    NEEDS_MPIEXEC,
    assert_left_to_the_watchdog,
    assert_moved,
    run_two_ranks,
    script,
)

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]


@pytest.mark.parametrize("what", ["barrier", "sum", "broadcast", "compare"])
def test_an_interrupt_in_a_meetings_wait_is_raised_once_the_meeting_is_made(tmp_path, what):
    run_two_ranks("run_meeting_interrupt.py", tmp_path, what)
    said = [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]
    assert said == ["KeyboardInterrupt: ", "nothing"], said
    assert not list(tmp_path.glob("rank*.err"))
    assert_moved(tmp_path, 0.75)  # the step after it, alike: (1 + 2) / 2 examples * lr 0.5
    np.testing.assert_equal(*(dict(np.load(tmp_path / f"values{r}.npz")) for r in (0, 1)))


@pytest.mark.parametrize(
    "what, raised", [("close", "KeyboardInterrupt: "), ("close-sigterm", "SystemExit: 143")]
)
def test_an_interrupt_in_closes_last_exchange_is_raised_without_an_abort(tmp_path, what, raised):
    """Rank 1 comes to close 1 s late; rank 0's SIGINT (or a SIGTERM whose handler raises
    SystemExit) comes as it waits there. Raised as the Wait returned, it aborted the job (exit
    130, or 143) though every rank had made the exchange, and rank 1, closed and gone on, was
    killed with it. Now it is raised once the exchange is made, with no abort: both ranks go
    on after their close."""
    run_two_ranks("run_meeting_interrupt.py", tmp_path, what)
    said = [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]
    assert said == [raised, "nothing"], said
    assert [(tmp_path / f"left{rank}.txt").exists() for rank in (0, 1)] == [True, True]


def test_a_peer_that_never_reaches_the_meeting_is_left_to_the_watchdog(tmp_path):
    """The hold leaves the meeting's wait as interruptible as before: rank 1 never comes, rank 0
    gets two SIGINTs there (noted, held), and its watchdog (2 s) still stops the job."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    args = [*script("run_meeting_interrupt.py"), str(tmp_path), "barrier", "never"]
    assert_left_to_the_watchdog(
        args, tmp_path, "in the Wait of an Iallgather on the job communicator"
    )
