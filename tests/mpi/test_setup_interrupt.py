"""A Ctrl-C on one rank inside ``MPISync.setup``, between two of its collectives
(``run_setup_interrupt.py``, real ``mpiexec -n 2``, a real SIGINT): raised there, it left the
other rank waiting in the next one (the parameters' broadcast, the gradients' ``Comm.Dup``)
until its watchdog aborted the job, and this rank's setup unfinished (its close aborted too).
Now the whole setup is held: every rank sets up alike, then the interrupt is raised, and both
ranks go on alike."""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, assert_moved, run_two_ranks

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]


def test_an_interrupt_between_setups_collectives_is_raised_once_every_rank_set_up(tmp_path):
    run_two_ranks("run_setup_interrupt.py", tmp_path)
    said = [(tmp_path / f"setup{rank}.txt").read_text().splitlines() for rank in (0, 1)]
    assert said == [["KeyboardInterrupt: "] * 2, ["nothing"] * 2], said
    assert not list(tmp_path.glob("rank*.err"))
    assert_moved(tmp_path, 0.75)  # the step after it, alike: (1 + 2) / 2 examples * lr 0.5
    np.testing.assert_equal(*(dict(np.load(tmp_path / f"values{r}.npz")) for r in (0, 1)))
