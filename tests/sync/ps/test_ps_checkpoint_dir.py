"""A shard checks its ``--checkpoint-dir`` when it starts (review k144): one it could not write
was found at the first checkpoint request, an epoch or hours in, and the chief, which asks the
shards before it writes its own part, failed the job with no checkpoint at all."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from ps_helpers import REPO_ROOT


def _pserver(*extra: str) -> subprocess.CompletedProcess:
    """``distconv pserver`` on 127.0.0.1 port 0; killed (TimeoutExpired) if it keeps serving."""
    cmd = [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0", "--shard",
           "0", "--num-shards", "1", "--workers", "1", "--insecure", *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20, env=env)


@pytest.mark.timeout(60)
def test_a_checkpoint_dir_that_cannot_be_made_stops_the_shard_at_start(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    directory = blocker / "parts"  # under a regular file: no one can make it, root neither
    done = _pserver("--checkpoint-dir", str(directory))
    assert done.returncode == 1, done
    assert f"--checkpoint-dir {directory}: cannot make it: Not a directory" in done.stderr
    assert "listening on" not in done.stdout


@pytest.mark.timeout(60)
def test_a_missing_checkpoint_dir_is_made_and_left_empty(shards, tmp_path):
    directory = tmp_path / "new" / "parts"
    shards.start(1, workers=1, extra=["--checkpoint-dir", str(directory)])  # it listens
    assert directory.is_dir() and not list(directory.iterdir())
