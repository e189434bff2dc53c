"""``distconv OPTION train`` under MPI: a rank whose parse fails ends the job whatever stands
before the command. The check that the failed process is a rank of a training MPI job read past
``-q`` alone, then past the exact words of ``-q`` and ``-v``: a rank failing after ``-v``, after
a form argparse takes (``-vv``, ``--verb``), or refused for another option there
(``--verbose=1``, ``-vx``, a misspelt one) exited without aborting, and the others waited in
``MPI_Init`` until killed."""

from __future__ import annotations

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.mpi.test_train_start import TRAIN

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "option, epochs, said",
    [
        *(
            (form, "x", "argument --epochs: must be an integer")
            for form in ("-v", "--verbose", "-vv", "--verb")
        ),
        *((word, "1", "distconv: error:") for word in ("--verbose=1", "-vx", "--verbse")),
    ],
)
def test_one_rank_failing_its_parse_after_an_option_before_train_ends_the_job(
    tmp_path, option, epochs, said
):
    good = [*TRAIN, "--sync", "mpi", "--epochs", "1", "--out", str(tmp_path / "run")]
    at = TRAIN.index("train")
    bad = [*TRAIN[:at], option, *TRAIN[at:], "--sync", "mpi", "--epochs", epochs]
    proc = run_mpi(["-n", "1", *good, ":", "-n", "1", *bad], timeout=40)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert said in proc.stderr, proc.stderr[-2000:]
