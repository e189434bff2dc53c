"""What every launcher test gets: a ``HOME`` of its own for the launchers it starts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.launcher import launch_cli

#: matplotlib's folder as the user has it (``MPLCONFIGDIR``, else its font cache's): under a new
#: ``HOME`` a worker that plots would build the font cache again in every test, and log
#: "generated new fontManager" (a line that test_launch_json_lines rightly finds foreign).
#: matplotlib locks that cache for processes that share it.
MATPLOTLIB = os.environ.get("MPLCONFIGDIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "matplotlib"
)


@pytest.fixture(autouse=True)
def own_home(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new empty folder, ``HOME`` for the test in :data:`tests.launcher.launch_cli.ENV` and in
    every test module's own environment (:data:`~tests.launcher.launch_cli.LAUNCHER_ENVS`): the
    launcher, ``mpiexec`` and the ranks that :func:`~tests.launcher.launch_cli.launch` (or a
    test with one of them) starts keep their files there (``~/.cache``, MPI's), not in the user's
    ``HOME``, which both xdist workers share; all but matplotlib's (:data:`MATPLOTLIB`). Beside
    ``tmp_path``, not in it: tests assert what the launcher left there."""
    home = tmp_path_factory.mktemp("home")
    for env in launch_cli.LAUNCHER_ENVS:
        monkeypatch.setitem(env, "HOME", str(home))
        monkeypatch.setitem(env, "MPLCONFIGDIR", MATPLOTLIB)
    return home


@pytest.fixture
def no_batch_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """No batch system's host list in this process's environment
    (:data:`launcher.mpi.SCHEDULER_HOSTS`): an in-process mpi launch's hint is then the local
    one of its ranks, as on a workstation, also where the tests run inside a Slurm job."""
    from launcher.mpi import SCHEDULER_HOSTS

    for name in SCHEDULER_HOSTS:
        monkeypatch.delenv(name, raising=False)
