"""A ``distconv train`` run resumed in the middle of an epoch writes the uninterrupted run's
metrics lines to the bit in every field but the timings and push counts (``UNREPEATED``), in
float64, alone and under ``mpiexec -n 2``, now that its checkpoint carries each rank's waits
(``rank_collective_seconds``) beside the loss sums. The other resume tests compare
``train_loss`` alone, or every field to a relative 1e-6. Real ``distconv train`` processes;
a resume "after a kill" is the run directory with the manifests after the cut removed, as a
kill just after that checkpoint leaves it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.checkpoint import load_checkpoint
from distconv.epoch_sums import RANK_WAITS
from distconv.epoch_tally import UNREPEATED
from distconv.run_dir import RunDirectory
from tests.child_env import child_env
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

TRAIN = ["-m", "distconv", "train", "--data", "synthetic", "--epochs", "2", "--dtype", "float64",
         "--checkpoint-every", "3", "--keep-checkpoints", "100", "--no-progress"]  # fmt: skip


def _train(ranks: int, out: Path, *extra: str) -> list[dict]:
    args = [*TRAIN, "--out", str(out), *extra]
    if ranks == 1:
        proc = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, env=child_env(), timeout=100
        )
    else:
        proc = run_mpi(["-n", str(ranks), sys.executable, "-m", "mpi4py", *args], timeout=100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _cut(whole: Path, run: Path, step: int) -> list[float]:
    """``whole``'s run directory as a kill just after step ``step``'s checkpoint leaves it, in
    ``run``; the waits that checkpoint carries, one per rank."""
    shutil.copytree(whole, run)
    for manifest in (run / "checkpoints").glob("step-*.json"):
        if int(manifest.stem[5:]) > step:
            manifest.unlink()
    latest = RunDirectory(run).latest()
    assert latest.step == step
    return load_checkpoint(latest.part("chief")).extra["sums"][RANK_WAITS]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=NEEDS_MPIEXEC)])
def test_a_resumed_run_writes_the_uninterrupted_lines_to_the_bit(tmp_path, ranks):
    if ranks > 1:
        pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    whole = tmp_path / "whole"
    expected = _train(ranks, whole)
    per_epoch = expected[0]["step"]
    deterministic = [{k: v for k, v in r.items() if k not in UNREPEATED} for r in expected]
    for cut in (3, per_epoch + 3):  # in the first epoch, in the second
        run = tmp_path / f"cut{cut}"
        carried = _cut(whole, run, cut)
        assert len(carried) == ranks and all(wait >= 0 for wait in carried), carried
        lines = _train(ranks, run, "--resume")
        assert [{k: v for k, v in r.items() if k not in UNREPEATED} for r in lines] == (
            deterministic
        ), cut
