"""A Trainer run under a real ``mpiexec -n 2`` records each rank's time in the Trainer's
collectives between steps (its stop checks, metric sums and checkpoint barriers), as a
parameter-server or local run does: ``collective_seconds_per_rank`` and its most,
``collective_seconds``, in each epoch's line of ``metrics.jsonl`` (``run_trainer.py``, which
checkpoints every 2 steps into its run directory), and each rank's running total in its
``traffic()`` and ``/metrics`` (``run_collective_totals.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distconv.epoch_sums import PUSH_COUNTS
from distconv.metrics import read_metrics
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script
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


def test_an_mpi_ranks_traffic_and_metrics_hold_its_waits_and_its_lines_no_pushes(tmp_path):
    """``MPISync.traffic()`` adds the Trainer's waits to its own totals where there are several
    ranks, and ``/metrics`` serves them whole (the last epoch's end too, after its checkpoint),
    with one step-sync sample a step; an allreduce run's lines count no pushes (each step is one
    update, none is dropped)."""
    run, out = tmp_path / "run", tmp_path / "totals"
    proc = run_mpi(["-n", "2", *script("run_collective_totals.py"), str(out), str(run)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in range(2):
        said = json.loads(Path(f"{out}.{rank}.json").read_text())
        waited = said["traffic"]["collective_seconds"]
        assert waited > 0, said
        assert said["served"] == pytest.approx(waited), said
        assert said["samples"] == said["steps"] == 20, said
    lines = read_metrics(run / "metrics.jsonl")
    assert [line["epoch"] for line in lines] == [1, 2]
    assert not any(set(PUSH_COUNTS) & set(line) for line in lines), lines
