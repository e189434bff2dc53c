"""A rank whose communication thread is stuck inside MPI still ends the job from ``close``
(``run_mpi_stuck_abort.py``, real ``mpiexec -n 2``).

When the main thread's wait for the thread gives up (a start stuck on a broken link, which the
watchdog does not watch), ``finish_step`` raises and ``close`` calls ``MPI_Abort`` from the
main thread while the thread is still inside MPI: two threads in MPI, which
``MPI_THREAD_SERIALIZED`` does not allow, and no watchdog to end the process should the abort
hang (its last-resort kill covers its own stops only). MPICH's abort ends the job at once at
either thread level; this checks that it still does, and that the error says what the thread
is stuck in.
"""

from __future__ import annotations

import time

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC

STUCK = "the communication thread is still inside the allreduce of gradient bucket 0"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("thread_level", [None, "serialized"])
def test_close_aborts_the_job_while_the_thread_is_stuck_inside_mpi(tmp_path, thread_level):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    began = time.monotonic()
    proc = run_mpi(["-n", "2", *script("run_mpi_stuck_abort.py", thread_level), str(tmp_path)])
    took = time.monotonic() - began
    assert proc.returncode != 0, proc.stderr
    finished = (tmp_path / "finish0.txt").read_text()
    assert finished.startswith("SyncError: ") and STUCK in finished, (finished, proc.stderr)
    assert f"rank 0: SyncError: waited for gradient bucket 0: {STUCK}" in proc.stderr
    assert "aborting the MPI job" in proc.stderr, proc.stderr
    assert took < 30, (took, proc.stderr)  # rank 1's pass lasts 60 s: the abort ended it
