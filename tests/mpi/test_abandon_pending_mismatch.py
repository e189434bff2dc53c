"""A second setup after a step whose ranks laid their buckets out differently: no rank sent a
piece of it, so the setup sends none of it either (the ranks' pieces differ: one rank's last
allreduce would wait for ever), whether the step's check refused it during the step or is
still pending at the setup."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(120)
@pytest.mark.parametrize("when", ["step", "setup"])
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_step_whose_layouts_differ_sends_nothing_when_abandoned(tmp_path, overlap, when):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    command = [*script("run_abandon_pending_mismatch.py"), str(tmp_path), overlap, when]
    proc = run_mpi(["-n", "2", *command], timeout=90)
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        assert (tmp_path / f"done{rank}.txt").exists()
        if when == "step":
            error = (tmp_path / f"error{rank}.txt").read_text()
            assert "lay out gradient buckets differently" in error, error
