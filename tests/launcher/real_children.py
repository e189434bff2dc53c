"""What the launcher's tests of real children share: a real ``mpiexec`` (or a skip), and a
:class:`~launcher.child.Child` run to its end."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from launcher.child import Child, ChildSpec


def mpiexec_or_skip() -> str:
    """The ``mpiexec`` on PATH; skips the test where there is none, or mpi4py is missing."""
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not on PATH")
    pytest.importorskip("mpi4py")
    return mpiexec


def run_to_exit(tmp_path: Path, spec: ChildSpec, log_name: str | None = None) -> Child:
    """``spec`` run as a real child, its output to a file in ``tmp_path`` and its log
    ``log_name`` there (default ``<name>.log``), waited for (10 s at most) and finished."""
    with open(tmp_path / "out", "wb") as out:
        child = Child(spec, tmp_path / (log_name or f"{spec.name}.log"), out, threading.Lock())
        deadline = time.monotonic() + 10
        while child.poll() is None:
            assert time.monotonic() < deadline, "the child did not exit"
            time.sleep(0.02)
        child.finish()
    return child
