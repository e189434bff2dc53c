"""The children the deploy tests start import what the parent imports: this checkout first,
then the parent's ``PYTHONPATH`` (a PyYAML put there, ``--target``, is the one they test)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from tests.child_env import REPO_ROOT, child_env
from tests.deploy.test_check_manifests_command import in_a_child

pytestmark = pytest.mark.timeout(120)

_WHERE = "import distconv, placed, yaml; print(distconv.__file__, placed.__file__, yaml.__file__)"


@pytest.fixture
def placed(tmp_path, monkeypatch):
    """A module ``placed`` and a stand-in ``distconv`` in a folder the parent's PYTHONPATH
    names before what it had (which may hold the PyYAML under test)."""
    (tmp_path / "placed.py").write_text("")
    (tmp_path / "distconv").mkdir()
    (tmp_path / "distconv" / "__init__.py").write_text("")
    had = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), had]))
    return tmp_path


def _where(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done.stderr
    out = done.stdout if isinstance(done.stdout, str) else done.stdout.decode()
    return out.split()


def test_a_child_finds_the_parents_path_after_the_checkout(placed):
    done = subprocess.run(
        [sys.executable, "-c", _WHERE], capture_output=True, text=True, env=child_env(), timeout=60
    )
    assert _where(done) == [
        str(REPO_ROOT / "distconv" / "__init__.py"),
        str(placed / "placed.py"),
        yaml.__file__,
    ]


def test_the_check_commands_children_do_too(placed):
    assert _where(in_a_child("-c", _WHERE))[1] == str(placed / "placed.py")


def test_the_path_names_each_folder_once_and_no_empty_one(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/a", "", "/b", str(REPO_ROOT), "/a"]))
    assert child_env({"A": "b"}, X="1") == {
        "A": "b",
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), "/a", "/b"]),
        "X": "1",
    }


def test_a_relative_entry_names_the_parents_folder_in_a_child_run_elsewhere(tmp_path, monkeypatch):
    """``PYTHONPATH=repo:lib`` (relative, as CI may set it) names folders of the parent's
    working directory; a child run from another (the check command's ``cwd``) read them from
    its own, so it missed the parent's package, or took one of its folder's for it."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "placed.py").write_text("")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "lib")
    done = in_a_child("-c", _WHERE, cwd=tmp_path / "elsewhere")
    assert _where(done)[1] == str(tmp_path / "lib" / "placed.py")
