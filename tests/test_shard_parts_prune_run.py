"""A run moved off the parameter server: once the local run has saved as many checkpoints as
it keeps, the shards' parts in its ``--out`` are gone, which stayed there for good before.

A real shard writing its parts into the run's ``--out`` (as ``distconv-launch`` points it),
stopped with SIGTERM (its ``steplast`` part), then a real local resume."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.child_env import child_env
from tests.processes import run_job
from tests.sync.ps.ps_helpers import Shards


def _train(out: Path, *args: str) -> None:
    argv = [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--batch-size",
            "32", "--no-progress", "--checkpoint-every", "2", "--out", str(out), *args]  # fmt: skip
    done = run_job(argv, child_env(), timeout=60)
    assert done.returncode == 0, done.stderr[-800:]


def _parts(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.startswith("pserver-shard"))


@pytest.mark.timeout(120)
def test_a_run_moved_off_the_shards_removes_their_parts(tmp_path):
    out = tmp_path / "out"
    shards = Shards(tmp_path)
    try:
        (endpoint,) = shards.start(1, workers=1, extra=["--checkpoint-dir", str(out)])
        _train(out, "--pservers", endpoint, "--insecure", "--epochs", "1")
    finally:
        shards.stop()  # SIGTERM: the shard writes its steplast part
    left = _parts(out)
    assert "pserver-shard0-steplast.safetensors" in left and len(left) > 1, left
    _train(out, "--resume", "--epochs", "2")  # local: keeps 3 of the epoch's 6 checkpoints
    assert _parts(out) == []
