"""A Trainer run under a real ``mpiexec -n 2`` records each rank's time in the Trainer's
collectives between steps (its stop checks, metric sums and checkpoint barriers), as a
parameter-server or local run does: ``collective_seconds_per_rank`` and its most,
``collective_seconds``, in each epoch's line of ``metrics.jsonl`` (``run_trainer.py``, which
checkpoints every 2 steps into its run directory)."""

from __future__ import annotations

import pytest

from distconv.metrics import read_metrics
from tests.mpi.common import NEEDS_MPIEXEC
from tests.mpi.test_trainer_mpi import two_ranks

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def test_an_mpi_run_records_each_ranks_collective_seconds(tmp_path):
    run = tmp_path / "run"
    _, steps = two_ranks(tmp_path, "waits", "0", 2, run_dir=run)
    assert steps == 8
    lines = read_metrics(run / "metrics.jsonl")
    assert [line["epoch"] for line in lines] == [1, 2]
    for line in lines:
        waits = line["collective_seconds_per_rank"]
        assert len(waits) == 2 and all(w > 0 for w in waits), line
        assert line["collective_seconds"] == max(waits) < line["seconds"], line
