"""16-bit parameters over real ``mpiexec -n 2``: buckets carry averages, so the sum over the
ranks cannot overflow float16 where each rank's own sum does not."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.parametrize("size", [8, 7])
@pytest.mark.parametrize("overlap", ["0", "1"])
def test_float16_sums_over_ranks_do_not_overflow(overlap, size):
    """Size 7: a 16-bit bucket is reduced in one chunk per rank, so it is padded to a multiple
    of the ranks (before, an odd size failed to reshape)."""
    proc = run_mpi(["-n", "2", *script("run_float16_params.py"), overlap, str(size)])
    assert proc.returncode == 0, proc.stderr
    values = [float(v) for v in proc.stdout.split()]
    assert values == [-0.78125] * (size + 8)  # 0.01 * 80000 / 1024, exact in float16
