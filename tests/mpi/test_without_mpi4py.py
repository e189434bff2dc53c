"""MPISync without mpi4py: one process alone, unless an MPI launcher started it as one of
several ranks, where each would otherwise train alone and end with status 0."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distconv.optim import create_optimizer
from distconv.runtime import RuntimeConfigError
from distconv.sync.mpi import MPISync, SingleRankComm
from tests.child_env import child_path
from tests.mpi.common import NEEDS_MPIEXEC, mpiexec

LAUNCHER_SIZES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE")
#: a script that builds the sync as a user's would, and says what it got
SCRIPT = (
    "from distconv.optim import create_optimizer\n"
    "from distconv.sync.mpi import MPISync\n"
    "s = MPISync(create_optimizer('sgd'))\n"
    "print('rank', s.rank, 'of', s.world_size, flush=True)\n"
    "s.close()\n"
)


@pytest.fixture
def no_mpi4py(monkeypatch):
    """Make ``import mpi4py`` fail, as on a machine without it; no launcher's variables."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    for name in LAUNCHER_SIZES:
        monkeypatch.delenv(name, raising=False)


def test_a_process_no_launcher_started_trains_alone(no_mpi4py):
    sync = MPISync(create_optimizer("sgd"))
    assert isinstance(sync.comm, SingleRankComm) and sync.world_size == 1
    sync.close()


@pytest.mark.parametrize("variable", LAUNCHER_SIZES)
def test_one_rank_of_a_launched_job_is_refused_saying_mpi4py_is_missing(
    no_mpi4py, monkeypatch, variable
):
    monkeypatch.setenv(variable, "2")
    with pytest.raises(RuntimeConfigError, match=r"mpi4py cannot be imported \(.*one of 2 ranks"):
        MPISync(create_optimizer("sgd"))
    monkeypatch.setenv(variable, "1")  # mpiexec -n 1: alone, as it should
    MPISync(create_optimizer("sgd")).close()


@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
@NEEDS_MPIEXEC[0]
def test_mpiexec_n_2_without_mpi4py_fails_instead_of_two_lone_jobs(tmp_path):
    hidden = tmp_path / "mpi4py"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('hidden for the test')\n")
    env = {**os.environ, "PYTHONPATH": child_path(tmp_path)}
    proc = subprocess.run(
        [mpiexec(), "-n", "2", sys.executable, "-c", SCRIPT],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # before: "rank 0 of 1" twice, status 0
    assert proc.returncode != 0, proc.stdout
    assert "rank 0 of 1" not in proc.stdout
    assert "mpi4py cannot be imported (hidden for the test)" in proc.stderr
