"""A KeyboardInterrupt on one rank alone as a blocking Wait inside ``finish_step`` returns (a
SIGINT that arrived while it waited there for a slower rank), with no communication thread,
after the flags went: a gradient piece's Wait or the used-parameter flags' own
(``run_wait_interrupt.py``, real ``mpiexec -n 2``). Before, the interrupted rank left the step
with its collectives unfinished and its failure untold, and on step 0 the other rank waited in
the first pass's record (an Allgather on the job communicator) until the watchdog stopped the
job."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, assert_moved, run_two_ranks

pytestmark = pytest.mark.timeout(120)


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("what", ["Iallreduce on the gradients", "Iallreduce on the job"])
def test_an_interrupt_in_a_wait_of_finish_step_fails_the_step_on_that_rank(tmp_path, what):
    """Rank 0 finishes the step's collectives, updates nothing and raises the interrupt; rank
    1 finishes the step; the refit that follows goes on from rank 0's parameters on both."""
    run_two_ranks("run_wait_interrupt.py", tmp_path, what)
    said = [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]
    assert said[0] == f"KeyboardInterrupt: the Wait of an {what} communicator", said
    assert said[1] == "nothing", said
    assert not list(tmp_path.glob("setup*.txt")), "the refit's setup was refused"
    assert_moved(tmp_path, 0.75)  # the refit's step alone: (1 + 2) / 2 examples * lr 0.5


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("name", ["wait", "finish"])
def test_an_interrupt_in_a_wait_on_the_thread_fails_the_step_on_that_rank(tmp_path, name):
    """The same with the communication thread (overlap 1): the main thread's wait on it for a
    bucket (CommThread.wait) or for the flags (CommThread.finish) interrupted on rank 0. Before,
    reduce_all left at once: rank 0's failure untold, and rank 1 waited in step 0's record of
    the first pass while rank 0 waited in its refit's setup, until the watchdog."""
    run_two_ranks("run_wait_interrupt.py", tmp_path, f"thread {name}")
    said = [(tmp_path / f"said{rank}.txt").read_text() for rank in (0, 1)]
    assert said == [f"KeyboardInterrupt: CommThread.{name}", "nothing"], said
    assert not list(tmp_path.glob("setup*.txt")), "the refit's setup was refused"
    assert_moved(tmp_path, 0.75)
