"""launcher/ installs as distconv.launch, with the distconv-launch command, and nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11")


def pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())


def build_leftovers() -> dict[str, int]:
    """What a build in the checkout leaves there (``build/``, ``*.egg-info``): each file's
    path and modification time."""
    found = [REPO_ROOT / "build", *REPO_ROOT.glob("*.egg-info")]
    return {
        str(path): path.stat().st_mtime_ns
        for top in found
        for path in [top, *top.rglob("*")]
        if path.exists()
    }


def sources(into: Path) -> Path:
    """The files a wheel is built from, copied to ``into``: pip builds in the tree it is
    given, and in the checkout its ``build/`` outlived the run (another test's leftovers, or a
    module deleted since, went into the next wheel) and was written by whatever ran beside."""
    into.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO_ROOT / name, into / name)
    for name in ("distconv", "launcher"):
        shutil.copytree(REPO_ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def test_every_distconv_package_is_listed():
    """The explicit package list (needed for the package-dir mapping) misses nothing."""
    on_disk = {
        ".".join(path.parent.relative_to(REPO_ROOT).parts)
        for path in (REPO_ROOT / "distconv").rglob("__init__.py")
    }
    on_disk |= {
        "distconv.launch." + ".".join(p.parent.relative_to(REPO_ROOT / "launcher").parts)
        for p in (REPO_ROOT / "launcher").rglob("*/__init__.py")
    }
    listed = set(pyproject()["tool"]["setuptools"]["packages"])
    assert on_disk | {"distconv.launch"} == listed, "update [tool.setuptools] packages"


def test_console_scripts():
    scripts = pyproject()["project"]["scripts"]
    assert scripts["distconv-launch"] == "distconv.launch.cli:main"
    assert pyproject()["tool"]["setuptools"]["package-dir"] == {"distconv.launch": "launcher"}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_wheel_install_has_distconv_launch_and_no_launcher(tmp_path):
    target = tmp_path / "site"
    left = build_leftovers()
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-cache-dir", "--target", str(target), str(sources(tmp_path / "src"))],
        capture_output=True, text=True, timeout=280, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert build_leftovers() == left, "the build wrote into the checkout"
    assert (target / "distconv" / "launch" / "supervisor.py").is_file()
    assert not (target / "launcher").exists()
    assert (target / "bin" / "distconv-launch").is_file()
    env = {**os.environ, "PYTHONPATH": str(target)}
    ran = subprocess.run(
        [sys.executable, "-m", "distconv.launch", "mpi", "-np", "1", "--mpiexec", "sh",
         "--mpi-flavor", "mpich", "--dry-run", "--", "--epochs", "1"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "-m mpi4py -m distconv train --sync mpi --epochs 1 --out " in ran.stdout
