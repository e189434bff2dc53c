"""MPISync under a launcher of another MPI than mpi4py's: MPI makes each rank a world of one,
which would train alone and end with status 0; the sync refuses, naming the library."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.mpi.common import REPO_ROOT
from tests.mpi.test_without_mpi4py import LAUNCHER_SIZES, SCRIPT

pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def run_script(**variables: str) -> subprocess.CompletedProcess:
    """SCRIPT in a fresh process (MPI starts there as a singleton), with ``variables`` set."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_SIZES}
    env.update(PYTHONPATH=str(REPO_ROOT), **variables)
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("variable", LAUNCHER_SIZES)
def test_a_launcher_s_rank_that_mpi_makes_a_world_of_one_is_refused(variable):
    proc = run_script(**{variable: "3"})
    # before: "rank 0 of 1", status 0, on every rank of the job
    assert proc.returncode != 0, proc.stdout
    assert "rank 0 of 1" not in proc.stdout
    said = proc.stderr.strip().splitlines()[-1]
    assert "RuntimeConfigError: an MPI launcher started this process as one of 3 ranks" in said
    assert "mpi4py's MPI library (" in said and "is not the launcher's" in said


def test_a_process_no_launcher_started_is_a_world_of_one():
    proc = run_script()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["rank", "0", "of", "1"]
