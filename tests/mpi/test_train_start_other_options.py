"""``distconv --verbose=1 train`` under MPI: a rank whose parse fails on any option before the
command ends the job, as one failing after ``-v`` does. The check that the failed process is a
rank of a training MPI job read past ``-q`` and ``-v`` in the forms argparse takes them alone,
so a rank refused for another word there (``--verbose=1``, ``-vx``, a misspelt option) exited
without aborting and the others waited in ``MPI_Init`` until killed."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.mpi.test_train_start import TRAIN

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option", ["--verbose=1", "-vx", "--verbse"])
def test_one_rank_refused_for_an_option_before_train_ends_the_job(tmp_path, option):
    good = [*TRAIN, "--sync", "mpi", "--epochs", "1", "--out", str(tmp_path / "run")]
    at = TRAIN.index("train")
    bad = [*TRAIN[:at], option, *TRAIN[at:], "--sync", "mpi", "--epochs", "1"]
    proc = run_mpi(["-n", "1", *good, ":", "-n", "1", *bad], timeout=40)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "distconv: error:" in proc.stderr, proc.stderr[-2000:]
