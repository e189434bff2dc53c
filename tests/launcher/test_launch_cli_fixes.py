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


@pytest.mark.skipif(not HAS_RENDERER, reason="distconv.deploy is not merged yet")
@pytest.mark.timeout(60)
@pytest.mark.parametrize("out_flag", [["--out", "/data/run"], ["--out=/opt/run"]])
def test_k8s_refuses_manifests_its_own_checks_reject(tmp_path, out_flag):
    """A train --out on the read-only root would crash every worker at its first checkpoint."""
    folder = tmp_path / "m"
    done = launch(
        "k8s", "--workers", "2", "--image", "img:1", "--out", str(folder),
        "--", "--epochs", "1", *out_flag,
        cwd=tmp_path,
    )  # fmt: skip
    line = one_error_line(done, "k8s")
    assert "is on no writable volume" in line and done.stdout == ""
    assert not folder.exists()  # nothing written that kubectl could apply
    # on the run volume the same job renders
    fine = launch(
        "k8s", "--workers", "2", "--image", "img:1", "--",
        "--epochs", "1", "--out", "/var/lib/distconv/run/mine",
        cwd=tmp_path,
    )  # fmt: skip
    assert fine.returncode == 0 and "kind: Job" in fine.stdout, fine.stderr
