"""A resumed ``mpiexec -n 2`` run logs the uninterrupted run's ``train_loss`` to the bit: each
checkpoint carries every rank's own loss sum, and each rank goes on adding to its own. Before,
the resumed run added its ranks' losses beside the checkpoint's global sum, another rounding.
Real ``distconv train`` jobs; a resume "after a kill" is the run directory with
the manifests after the cut removed, as a kill just after that checkpoint leaves it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

TRAIN = [sys.executable, "-m", "mpi4py", "-m", "distconv", "train", "--data", "synthetic",
         "--epochs", "2", "--dtype", "float64", "--checkpoint-every", "3",
         "--keep-checkpoints", "100", "--no-progress"]  # fmt: skip


def _train(out: Path, *extra: str) -> list[float]:
    proc = run_mpi(["-n", "2", *TRAIN, "--out", str(out), *extra], timeout=100)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["train_loss"] for line in lines]


@pytest.mark.timeout(400)
def test_two_ranks_resumed_mid_epoch_log_the_uninterrupted_losses(tmp_path):
    whole = tmp_path / "whole"
    expected = _train(whole)
    steps = sorted(int(m.stem[5:]) for m in (whole / "checkpoints").glob("step-*.json"))
    per_epoch = steps[-1] // 2
    mid_epoch = [s for s in steps if s % per_epoch]
    cuts = mid_epoch[:: max(1, len(mid_epoch) // 3)][:3]  # early, middle, late: one job each
    assert len(cuts) == 3, steps
    for cut in cuts:
        run = tmp_path / f"cut{cut}"
        shutil.copytree(whole, run)
        for manifest in (run / "checkpoints").glob("step-*.json"):
            if int(manifest.stem[5:]) > cut:
                manifest.unlink()
        assert _train(run, "--resume") == expected, cut
