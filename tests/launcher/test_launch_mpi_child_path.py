"""The launcher the MPI launch tests start, and its ranks, import what the parent imports: this
checkout, then the parent's own ``PYTHONPATH`` (a package put there, ``--target``, is the one
under test), as every other test's children do (tests/child_env.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.child_env import REPO_ROOT
from tests.launcher.test_launch_mpi import launch_env

_WHERE = "import distconv, placed; print(distconv.__file__, placed.__file__)"


@pytest.mark.timeout(60)
def test_the_launch_environment_keeps_the_parents_path_after_the_checkout(tmp_path, monkeypatch):
    (tmp_path / "placed.py").write_text("")
    had = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), had]))
    done = subprocess.run(
        [sys.executable, "-c", _WHERE],
        env=launch_env(tmp_path),
        cwd=tmp_path.parent,  # not the checkout: the path alone must find it
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        str(REPO_ROOT / "distconv" / "__init__.py"),
        str(tmp_path / "placed.py"),
    ]
