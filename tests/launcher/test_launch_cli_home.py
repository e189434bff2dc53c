"""The launchers that tests/launcher/launch_cli.py's ``launch()`` starts, and those the tests
start with its ``ENV`` themselves (some with a real ``mpiexec``, and its ranks), run with a
``HOME`` of the test's own (``tests/launcher/conftest.py``): they had the user's, shared by
both xdist workers, where MPI and Python keep files (``~/.cache``, Hydra's and Open MPI's), so
one test's run could read or break another's."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.launcher import launch_cli
from tests.launcher.launch_cli import ENV, launch


@pytest.mark.timeout(60)
def test_a_launch_runs_with_a_home_of_the_tests_own(tmp_path, tmp_path_factory):
    fake, seen = tmp_path / "mpiexec", tmp_path / "seen"
    fake.write_text(f'#!/bin/sh\necho "$HOME" > "{seen}"\n')
    fake.chmod(0o755)
    done = launch("mpi", "-np", "2", "--mpiexec", str(fake), "--mpi-flavor", "mpich",
                  "--run-dir", str(tmp_path / "run"), "--", "--epochs", "1",
                  cwd=tmp_path, timeout=50)  # fmt: skip
    assert done.returncode == 0, done.stderr
    home = Path(seen.read_text().strip())
    assert home.is_dir() and home.is_relative_to(tmp_path_factory.getbasetemp())  # was ~
    assert ENV["HOME"] == str(home)  # the tests that start a launcher with ENV themselves
    assert sorted(tmp_path.iterdir()) == [fake, tmp_path / "run", seen]  # none in cwd


#: the test modules that start launchers with an environment of their own (``ENV``), as pytest
#: names them; imported here, at collection, as pytest would: the fixture gives the environments
#: known as a test begins their ``HOME`` (these had the user's)
OWN_ENVS = {
    name: importlib.import_module(name)
    for name in (
        "test_supervision", "test_launch_train", "test_launch_pserver", "test_launch_preempt",
        "test_launch_lost_worker", "test_launch_train_flags", "test_launch_peer_failed",
    )
}  # fmt: skip


@pytest.mark.parametrize("name", OWN_ENVS)
def test_a_test_modules_own_environment_has_the_tests_home(name, own_home):
    assert OWN_ENVS[name].ENV["HOME"] == str(own_home)
    assert OWN_ENVS[name].ENV["MPLCONFIGDIR"] == launch_cli.ENV["MPLCONFIGDIR"]
