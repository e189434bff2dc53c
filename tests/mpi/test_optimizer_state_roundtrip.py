"""MPISync's optimizer state, under a real ``mpiexec -n 2``, passes save_checkpoint's checks of
optimizer state and restores bit for bit (run_optimizer_state_roundtrip.py)."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.parametrize("optimizer", ["adam", "momentum", "adagrad"])
def test_mpi_state_saves_and_restores_bitwise(tmp_path, optimizer):
    command = [*script("run_optimizer_state_roundtrip.py"), str(tmp_path), optimizer]
    proc = run_mpi(["-n", "2", *command], timeout=100)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["same"], proc.stdout
