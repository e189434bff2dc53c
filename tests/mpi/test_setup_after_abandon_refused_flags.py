"""A second fit after a ``finish_step`` whose float16 wire was refused on the communication
thread (``run_refused_wire_flags.py``, real ``mpiexec -n 2``).

The used-parameter flags' exchange is started on the thread, between the pieces: a bucket
refused after its start left it started and never completed, and the second setup dropped its
buffers under MPI (MPICH at exit: "Builtin communicator ... has pending 1 references"). Where
the refused bucket came before the start on one rank and after it on another (a parameter
fired on one rank only), the thread, which skips every collective after a failure, started it
on one rank alone. Now every rank starts it, failure or not, and setup completes it, once the
thread has stopped.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["last", "uneven"])
def test_a_second_fit_after_a_refused_wire_completes_the_flags(tmp_path, where):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", *script("run_refused_wire_flags.py"), str(tmp_path), where], 90)
    assert proc.returncode == 0, proc.stderr
    assert "pending" not in proc.stderr, proc.stderr
    values = [np.load(tmp_path / f"values{rank}.npz") for rank in (0, 1)]
    for rank in (0, 1):
        completed, seconds = (tmp_path / f"rank{rank}.txt").read_text().split()
        assert completed == "True" and float(seconds) < 10.0  # started on every rank, then done
        for name in "ab":  # the ranks agree; the step after the setup: the mean, 1.5, at lr 0.5
            np.testing.assert_array_equal(values[rank][name], values[0][name])
            after = values[rank][f"{name}_after"]
            np.testing.assert_allclose(after, values[rank][name] - 0.75, err_msg=name)
