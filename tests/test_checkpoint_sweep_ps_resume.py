"""The chief's sweep of the shards' parts (:mod:`distconv.checkpoint_sweep`) under a real
parameter server: two shards writing into the run's ``--out`` (as ``distconv-launch`` points
them), ``--keep-checkpoints 1`` (the tightest), stopped with SIGTERM (their ``steplast``
parts), then fresh shards and a ``--resume`` under the parameter server again.

After each run, the parts left are exactly those the kept checkpoint names (the sweep took
none of them, and no older numbered part stayed) and the steplast parts written after it; the
resume after the sweep trains to its end."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.child_env import child_env
from tests.processes import run_job
from tests.sync.ps.ps_helpers import Shards

LAST = {f"pserver-shard{s}-steplast.safetensors" for s in (0, 1)}


def _train(out: Path, endpoints: list[str], *args: str) -> None:
    argv = [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--batch-size",
            "32", "--no-progress", "--checkpoint-every", "2", "--keep-checkpoints", "1",
            "--pservers", ",".join(endpoints), "--insecure", "--out", str(out), *args]  # fmt: skip
    done = run_job(argv, child_env(), timeout=90)
    assert done.returncode == 0, done.stderr[-800:]


def _parts(out: Path) -> set[str]:
    return {p.name for p in out.iterdir() if p.name.startswith("pserver-shard")}


def _kept_names(out: Path) -> set[str]:
    """The parts the kept checkpoint names (by file name), of the one kept checkpoint."""
    (manifest,) = (out / "checkpoints").glob("step-*.json")
    return {Path(p).name for p in json.loads(manifest.read_text())["remote"].values()}


def _run_on_fresh_shards(tmp_path: Path, out: Path, mode: str, *args: str) -> None:
    """Train on two fresh shards writing their parts into ``out``, then stop them."""
    shards = Shards(tmp_path)
    try:
        endpoints = shards.start(2, workers=1, mode=mode, extra=["--checkpoint-dir", str(out)])
        _train(out, endpoints, *args)
    finally:
        shards.stop()  # SIGTERM: each shard writes its steplast part


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_resume_under_the_shards_after_the_sweep_trains_on(tmp_path, mode):
    out = tmp_path / "out"
    _run_on_fresh_shards(tmp_path, out, mode, "--epochs", "1")
    named = _kept_names(out)
    assert len(named) == 2, named
    assert _parts(out) == named | LAST  # the older numbered parts swept, none it names
    _run_on_fresh_shards(tmp_path, out, mode, "--resume", "--epochs", "2")
    assert _kept_names(out) != named  # a newer checkpoint kept since
    assert _parts(out) == _kept_names(out) | LAST  # the first stop's steplast swept, new ones
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2]
