"""MPISync under a launcher of another MPI than mpi4py's: MPI makes each rank a world of one,
which would train alone and end with status 0; the sync refuses, naming the library."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from distconv.runtime import RuntimeConfigError
from distconv.sync.mpi.comm import job_world
from tests.child_env import child_path
from tests.mpi.test_without_mpi4py import LAUNCHER_SIZES, SCRIPT

needs_mpi4py = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed"
)


def run_script(**variables: str) -> subprocess.CompletedProcess:
    """SCRIPT in a fresh process (MPI starts there as a singleton), with ``variables`` set."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_SIZES}
    env.update(PYTHONPATH=child_path(), **variables)
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60
    )


@needs_mpi4py
@pytest.mark.parametrize("variable", LAUNCHER_SIZES)
def test_a_launcher_s_rank_that_mpi_makes_a_world_of_one_is_refused(variable):
    proc = run_script(**{variable: "3"})
    # before: "rank 0 of 1", status 0, on every rank of the job
    assert proc.returncode != 0, proc.stdout
    assert "rank 0 of 1" not in proc.stdout
    said = proc.stderr.strip().splitlines()[-1]
    assert "RuntimeConfigError: an MPI launcher started this process as one of 3 ranks" in said
    assert "mpi4py's MPI library (" in said and "is not the launcher's" in said


@needs_mpi4py
def test_a_process_no_launcher_started_is_a_world_of_one():
    proc = run_script()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["rank", "0", "of", "1"]


class _OpenMPISingleton:
    """mpi4py on Open MPI 5 as a singleton: its library version as mpi4py returns it, with
    the C string's closing NUL that Open MPI counts in the length."""

    class COMM_WORLD:  # noqa: N801 - mpi4py's spelling
        @staticmethod
        def Get_size() -> int:  # noqa: N802
            return 1

    @staticmethod
    def Get_library_version() -> str:  # noqa: N802
        return "Open MPI v5.0.11, package: Open MPI Distribution, ident: 5.0.11\x00"


def test_the_refusal_names_open_mpi_without_its_version_string_s_nul(monkeypatch):
    """The NUL went into the error line (``... ident: 5.0.11^@) is not the launcher's``), and
    grep then took the job's log for a binary file."""
    for name in LAUNCHER_SIZES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PMI_SIZE", "2")  # Hydra's mpiexec, mpi4py on Open MPI
    with pytest.raises(RuntimeConfigError) as raised:
        job_world(_OpenMPISingleton)
    said = str(raised.value)
    assert "\x00" not in said
    assert "(Open MPI v5.0.11, package: Open MPI Distribution, ident: 5.0.11) is not" in said
