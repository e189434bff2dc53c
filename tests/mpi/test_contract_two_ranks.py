"""The sync contract under a real ``mpiexec -n 2`` (``run_contract.py``), where breaking it
cost the most: a gradient scaled by hand between ``backward`` and ``finish_step`` raced the
in-place reduction on the bucket's buffer, and the job ended with exit 0 and the ranks' weights
apart; a close with a step open aborted the job without the way out; a ``with`` block was no
choice at all. (One process, every transport: ``tests/sync/test_contract_enforced.py``.)"""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def _job(tmp_path, case: str):
    """The job of ``case``, and the ranks that got to their end."""
    proc = run_mpi(["-n", "2", *script("run_contract.py"), str(tmp_path), case], timeout=60)
    return proc, sorted(p.name for p in tmp_path.glob("end*.json"))


@pytest.mark.parametrize("case", ["scale", "abandoned"])
def test_a_gradient_scaled_between_backward_and_finish_step_aborts_the_job_naming_it(
    tmp_path, case
):
    """Closed on the write's error, or on it after the step's except called abandon_step."""
    proc, ended = _job(tmp_path, case)
    assert proc.returncode != 0 and ended == [], (proc.returncode, ended, proc.stderr)
    assert "SyncError: the gradient of " in proc.stderr, proc.stderr
    assert "was written after it fired and before MPISync.finish_step()" in proc.stderr
    assert "MPISync(grad_hook=...)" in proc.stderr


def test_a_close_with_a_step_open_aborts_the_job_naming_the_step_and_the_way_out(tmp_path):
    proc, ended = _job(tmp_path, "open")
    assert proc.returncode != 0 and ended == [], (proc.returncode, ended, proc.stderr)
    assert "sync closed in the middle of step 3" in proc.stderr, proc.stderr
    assert "call finish_step() before close(), or abandon_step() where" in proc.stderr


def test_an_exception_in_a_with_block_aborts_the_job_rather_than_leave_a_rank_waiting(tmp_path):
    proc, ended = _job(tmp_path, "raises")
    assert proc.returncode != 0 and ended == [], (proc.returncode, ended, proc.stderr)
    assert "RuntimeError: rank 0's own error, in its with block" in proc.stderr, proc.stderr


def test_a_clean_exit_mid_step_still_aborts_a_job_of_two_ranks(tmp_path):
    """docs/architecture.md: a clean sys.exit(0) goes on through close, but not past an MPI
    job's other rank waiting in the step: the job is aborted naming the step, status 1."""
    proc, ended = _job(tmp_path, "exit")
    assert proc.returncode != 0 and ended == [], (proc.returncode, ended, proc.stderr)
    assert "rank 0: SyncError: sync closed in the middle of step 1" in proc.stderr, proc.stderr
