"""``distconv-launch mpi`` runs the ``mpiexec`` beside the Python that runs the ranks before
PATH's: run by a virtual environment's Python that was not activated, it took PATH's (another
MPI's), and every rank stopped, alone in a world of one."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from launcher import mpi
from launcher.commands import LaunchError
from launcher.mpi import find_mpiexec
from tests.launcher.launch_cli import ENV


def _program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def two_mpis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """A Python in an environment of its own (``env/bin/python``, a link to this one) with an
    ``mpiexec`` beside it, and another ``mpiexec`` alone on PATH: (python, beside, on PATH)."""
    python = tmp_path / "env" / "bin" / "python"
    beside = _program(python.parent / "mpiexec")
    python.symlink_to(sys.executable)
    on_path = _program(tmp_path / "other" / "mpiexec")
    monkeypatch.setenv("PATH", str(on_path.parent))  # the environment a user's shell gives
    return python, beside, on_path


def test_the_mpiexec_beside_python_comes_before_paths(two_mpis):
    python, beside, on_path = two_mpis
    assert find_mpiexec(python=str(python)) == str(beside)
    beside.unlink()  # an mpirun beside it (Open MPI's wheel has both) still comes first
    mpirun = _program(python.parent / "mpirun")
    assert find_mpiexec(python=str(python)) == str(mpirun)
    mpirun.unlink()
    assert find_mpiexec(python=str(python)) == str(on_path)
    on_path.unlink()
    with pytest.raises(LaunchError, match="no mpiexec or mpirun beside Python or on PATH"):
        find_mpiexec(python=str(python))


def test_beside_a_python_of_the_systems_own_folders_paths_comes_first(
    two_mpis, tmp_path, monkeypatch
):
    """/usr/bin holds whatever MPI a package put there; a loaded module's on PATH decides.
    The system's folders hold no mpiexec here, and a test may not put one there: a folder of
    the test's stands in for them (reached through a link, as /bin is /usr/bin's)."""
    _, _, on_path = two_mpis
    system = tmp_path / "usr" / "bin"
    beside = _program(system / "mpiexec")
    (tmp_path / "bin").symlink_to(system)
    monkeypatch.setattr(mpi, "SHARED_BINS", (*mpi.SHARED_BINS, str(system)))
    for python in (system / "python3", tmp_path / "bin" / "python3"):
        assert find_mpiexec(python=str(python)) == str(on_path)
    on_path.unlink()  # where PATH has none, the one beside that Python still runs
    assert find_mpiexec(python=str(system / "python3")) == str(beside)


@pytest.mark.timeout(60)
def test_a_launch_by_an_environments_python_runs_its_mpiexec(two_mpis, tmp_path):
    python, beside, on_path = two_mpis
    env = {**ENV, "PATH": f"{on_path.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [str(python), "-m", "launcher", "mpi", "-np", "2", "--mpi-flavor", "mpich", "--dry-run",
         "--", "--epochs", "1"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    argv = shlex.split(done.stdout)
    command = argv[argv.index("-n") - 1 :]
    assert command[:3] == [str(beside), "-n", "2"], done.stdout
    assert str(python) in command  # the ranks run that Python too
