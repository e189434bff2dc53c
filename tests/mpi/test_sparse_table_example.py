"""``examples/sparse_table.py`` under ``mpiexec``: its bytes line says what MPI counted."""

from __future__ import annotations

import sys

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, REPO_ROOT, run_mpi

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(180)
def test_the_bytes_line_under_mpi_claims_no_start_up():
    """Under MPI the line read 'start-up included (through servers, rank 0 seeds them with the
    table once)', while MPI counts its gradient collectives only: 16 steps x 2 x every
    parameter's bytes, nothing at start-up."""
    example = str(REPO_ROOT / "examples" / "sparse_table.py")
    args = [
        "-n",
        "2",
        sys.executable,
        "-m",
        "mpi4py",
        example,
        "--epochs",
        "1",
        "--examples",
        "2048",
    ]
    done = run_mpi(args, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.split("bytes moved by rank 0: ")[1].splitlines()[0]
    moved, table = int(line.split()[0]), 100_000 * 32 * 4
    assert line.startswith(f"{moved} in 1 epoch(s) of 16 steps; a dense table moves")
    assert "start-up" not in line
    assert moved % (16 * 2) == 0 and table < moved // (16 * 2) < table * 1.01  # whole params
