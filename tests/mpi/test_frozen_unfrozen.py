"""A parameter frozen for some steps, then trained again, under ``mpiexec -n 2`` gives one
process's numbers (float64, Adam: a parameter updated while frozen, or its state stepped, or a
stale bucket layout after it is unfrozen, would show). LocalSync's own cases are in
tests/sync/test_local_frozen_*.py."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script
from tests.mpi.run_frozen_unfrozen import train_frozen

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_a_parameter_frozen_then_unfrozen_trains_as_in_one_process(tmp_path, overlap):
    proc = run_mpi(["-n", "2", *script("run_frozen_unfrozen.py"), str(tmp_path), overlap], 40)
    errors = [f.read_text() for f in tmp_path.glob("rank*.err")]
    assert proc.returncode == 0, (errors, proc.stderr[-3000:])
    want = train_frozen(LocalSync(create_optimizer("adam", lr=0.01)))
    for rank in (0, 1):
        got = dict(np.load(tmp_path / f"values{rank}.npz"))
        assert set(got) == set(want)
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-12, atol=1e-15, err_msg=name)
