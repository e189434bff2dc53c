"""The run's bytecode (``tests/conftest.py``): where ``PYTHONDONTWRITEBYTECODE`` is set, the
run compiles the checkout once for its child processes, and hides from them none of the
bytecode installed with Python and its packages."""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_env

pytestmark = pytest.mark.timeout(60)

#: a test of the inner run: a child it starts as the suite's tests do, and the bytecode the
#: child finds for a module of the standard library and one of the checkout
_INNER = """
import subprocess, sys

PROBE = (
    "import argparse, importlib.util as u, os, distconv.cli as c; "
    "print([os.path.exists(u.cache_from_source(m.__file__)) for m in (argparse, c)])"
)


def test_a_child_finds_the_bytecode():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True)
    assert done.stdout.strip() == "[True, True]", done.stdout + done.stderr
"""


def _installed(module) -> Path:
    """Where Python's own ``__pycache__`` keeps ``module``'s bytecode, whatever prefix this
    process was given."""
    source = Path(module.__file__)
    return source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"


def test_the_runs_children_read_the_checkout_compiled_and_the_standard_librarys_bytecode(
    tmp_path,
):
    """The run compiled the checkout into a ``PYTHONPYCACHEPREFIX`` of its own, and a Python
    given a prefix reads bytecode from there alone: each child compiled argparse, json,
    subprocess, numpy and the rest at every start, twice the CPU the checkout's modules had
    cost (tests/deploy/test_check_manifests_command.py: 48 s of CPU against 21 s without)."""
    if not _installed(argparse).exists():
        pytest.skip("this Python's standard library has no bytecode to hide")
    assert importlib.util.find_spec("tests.conftest") is not None
    (tmp_path / "test_inner.py").write_text(_INNER)
    env = child_env(PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPYCACHEPREFIX", None)  # the run's own folder, or none
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
        + ["-p", "tests.conftest", "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=50,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def test_a_pycache_folder_another_run_removes_while_this_one_looks_is_no_failure(
    tmp_path, monkeypatch
):
    """Another run in the checkout removes the ``__pycache__`` folders it wrote as it ends, at
    any time: one seen, then gone before it was read, raised FileNotFoundError from the walk
    of what the run had compiled (``Path.rglob``), and this run failed before its first test
    (about one walk in fifty, against a cleanup in a loop)."""
    from tests import conftest

    tag = sys.implementation.cache_tag
    gone, kept = tmp_path / "a" / "__pycache__", tmp_path / "b" / "__pycache__"
    for folder in (gone, kept):
        folder.mkdir(parents=True)
        (folder / f"m.{tag}.pyc").write_bytes(b"")
    scandir = os.scandir

    def removed_just_then(path="."):  # the other run's cleanup, between seeing it and reading
        if not isinstance(path, int) and Path(path) == gone:  # rmtree's own: by descriptor
            shutil.rmtree(gone)
        return scandir(path)

    monkeypatch.setattr(os, "scandir", removed_just_then)
    assert conftest._compiled([tmp_path]) == {kept / f"m.{tag}.pyc"}
