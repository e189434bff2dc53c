"""``distconv-launch`` refusals are one line, and a job can be launched again into its run dir.

Each test runs the real launcher as a subprocess on real files (review k59, findings 2, 5, 6).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_KEYS", "DISTCONV_PSERVERS"):
    ENV.pop(_name, None)
HAS_RENDERER = importlib.util.find_spec("distconv.deploy") is not None


def launch(*argv: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", *argv],
        env=ENV,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_error_line(done: subprocess.CompletedProcess, command: str) -> str:
    """The single error line of a refused launch (and nothing else on stderr)."""
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"distconv-launch {command}: error: "), lines
    return lines[0]


@pytest.mark.timeout(60)
def test_a_binary_hostfile_is_one_line_not_a_traceback(tmp_path):
    hostfile = tmp_path / "binhosts"
    hostfile.write_bytes(b"node1:2\n\xd0\x00\xff\xfe garbage\n")
    done = launch(
        "mpi", "-np", "2", "--hostfile", str(hostfile), "--dry-run", "--", "--epochs", "1",
        cwd=tmp_path,
    )  # fmt: skip
    line = one_error_line(done, "mpi")
    assert f"{hostfile}: not a text hostfile" in line
