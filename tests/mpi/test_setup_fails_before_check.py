"""One rank's setup raising before the job check's exchange, the script catching it there
(real ``mpiexec -n 2``): the other rank learns at once, not at the watchdog's timeout (k586)."""

from __future__ import annotations

import sys
import time

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: rank 1 gives setup two parameters of one name (a ValueError before the job check), catches
#: it and works alone for 30 s (no MPI) before it closes; rank 0's setup is good. The test's
#: 20 s end first, as would the watchdog's 40 s
CAUGHT_ALONE = """\
import time
import numpy as np
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync

sync = MPISync(create_optimizer("sgd"), timeout=40)
w = Parameter("w", np.ones(3))
params = [w, Parameter("w", np.zeros(2))] if sync.rank == 1 else [w]
try:
    try:
        sync.setup(params, {})
    except ValueError as error:
        print(f"rank {sync.rank} caught: {error}", flush=True)
        time.sleep(30)
finally:
    sync.close()
"""


def test_a_setup_that_raises_on_one_rank_before_the_job_check_is_told_at_once(tmp_path):
    """Rank 1's setup refused its parameters before the job check, and rank 1 went on alone:
    rank 0 waited in the job check's exchange until rank 1's close aborted, or the watchdog's
    timeout (600 s by default). The exchange is made all the same, naming the error, so rank 0
    raises a JobMismatch saying it at once."""
    script = tmp_path / "alone.py"
    script.write_text(CAUGHT_ALONE)
    began = time.monotonic()
    # under mpi4py's runner, whose abort on rank 0's JobMismatch ends rank 1's work alone
    done = run_mpi(["-n", "2", sys.executable, "-m", "mpi4py", str(script)], timeout=20)
    assert done.returncode != 0, done.stdout + done.stderr[-3000:]
    assert "rank 1 caught: " in done.stdout, done.stdout
    said = [line for line in done.stderr.splitlines() if line.startswith("distconv.sync")]
    assert any(
        line.startswith("distconv.sync.mpi.comm.JobMismatch: rank 0 and rank 1 run different")
        and "setup failed on rank 1 before its job check: ValueError: two parameters" in line
        for line in said
    ), done.stderr[-3000:]
    assert time.monotonic() - began < 15
