"""``distconv -vv train``, ``distconv --verb train``: forms of ``-v`` and ``-q`` that distconv's
parser takes before its command (a flag repeated, a long option abbreviated) end an MPI job
whose rank fails before ``MPI_Init`` as ``-v`` does. The check read past the exact words
``-q``, ``--quiet``, ``-v`` and ``--verbose`` alone, so such a rank exited without aborting
and the others waited in ``MPI_Init`` until killed."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.mpi.test_train_start import TRAIN

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option", ["-vv", "--verb"])
def test_one_rank_with_a_bad_option_after_a_form_of_verbose_ends_the_job(tmp_path, option):
    good = [*TRAIN, "--sync", "mpi", "--epochs", "1", "--out", str(tmp_path / "run")]
    at = TRAIN.index("train")
    bad = [*TRAIN[:at], option, *TRAIN[at:], "--sync", "mpi", "--epochs", "x"]
    proc = run_mpi(["-n", "1", *good, ":", "-n", "1", *bad], timeout=40)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "argument --epochs: must be an integer" in proc.stderr
