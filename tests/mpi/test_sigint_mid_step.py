"""Ctrl-C on one rank of a real ``mpiexec -n 2`` job in the middle of a step (no Trainer to
stop at an agreed step): the rank's ``close`` aborts the job at once, with the command line's
status 130 and a line that names the interrupt."""

from __future__ import annotations

import time

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.parametrize("where", ["grad", "finish"])
def test_ctrl_c_mid_step_aborts_the_job_naming_it(where):
    """Rank 1 interrupted with buckets on its communication thread (``grad``), or with the
    last one in flight (``finish``), while rank 0 waits in the step's reductions: no rank
    trains on, the job ends well within a timeout (nothing waits for the watchdog's 30 s),
    and the line said is ``KeyboardInterrupt``'s. It read ``KeyboardInterrupt: ;`` (the
    interrupt's empty message, between a colon and the semicolon)."""
    began = time.monotonic()
    proc = run_mpi(["-n", "2", *script("run_sigint_mid_step.py"), where], timeout=60)
    assert time.monotonic() - began < 20, proc.stderr
    assert proc.returncode == 130, proc.stderr
    assert "done" not in proc.stdout, proc.stdout
    assert "rank 1: KeyboardInterrupt; aborting the MPI job\n" in proc.stderr, proc.stderr
    assert "rank 0:" not in proc.stderr, proc.stderr  # the cause is rank 1's, said once
