"""A step that one rank abandoned before it started the used-parameter flags while another
finished it (``run_refused_wire_abandoned.py``, real ``mpiexec -n 2``).

The finishing rank started the flags' exchange (5fcc8f0: even after its thread refused a
float16 wire); the abandoning rank never did, so the finisher's pending exchange met the other
rank's setup check on the same communicator: MPICH's "Internal error" abort, or a check that
read the flags as a rank's row ("rank 0: step 1"). Now the abandoning rank starts them at its
second setup, every flag marked abandoned: the finisher's ``finish_step`` says so (or names
the refused wire), and setup's check names where each rank is on both ranks.
"""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC

SAID = (
    "ranks are at different points of the job (rank 0: comparing the job (setup's check) "
    "after 1 step, rank 1: comparing the job (setup's check) after 0 steps (1 abandoned))"
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "overlap, dtype, error",
    [
        ("0", "native", "another rank abandoned the step"),
        ("1", "native", "another rank abandoned the step"),
        ("1", "float16", "is not finite after the float16 wire"),
    ],
)
def test_a_step_one_rank_abandoned_and_another_finished_is_named_on_both(
    tmp_path, overlap, dtype, error
):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    command = [*script("run_refused_wire_abandoned.py"), str(tmp_path), overlap, dtype]
    proc = run_mpi(["-n", "2", *command], timeout=90)
    assert proc.returncode != 0  # setup's check refuses: the ranks counted different steps
    assert "Internal error" not in proc.stderr, proc.stderr
    assert error in (tmp_path / "error0.txt").read_text(), proc.stderr
    said = [tmp_path / f"setup{rank}.txt" for rank in (0, 1)]
    said = [path.read_text() for path in said if path.exists()]  # one may abort the other
    assert said, proc.stderr
    for text in said:
        seconds, message = text.split(" ", 1)
        assert float(seconds) < 10.0 and SAID in message, text
