"""A run whose sync keeps no step-exchange time (LocalSync: a rank alone) records no
``sync_seconds_per_rank``: its lines stay as they were, and its epoch line says no wait. The
field is the synchronous parameter server's and MPI's (tests/sync/ps/test_sync_straggler_metrics.py,
tests/mpi/test_stalled_rank_metrics_mpi.py)."""

from __future__ import annotations

import logging

from distconv.data import split, synthetic
from distconv.metrics import read_metrics
from tests.test_resume_checks import _trainer


def test_a_local_run_records_no_step_exchange_wait(tmp_path, caplog):
    train, test = split(synthetic(n=96, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
    with caplog.at_level(logging.INFO, logger="distconv.trainer"):
        (record,) = _trainer(tmp_path).fit(train, test, epochs=1)
    (line,) = read_metrics(tmp_path / "metrics.jsonl")
    assert "sync_seconds_per_rank" not in line and "sync_seconds_per_rank" not in record, line
    assert line["collective_seconds_per_rank"] == [record["collective_seconds"]], line
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch 1/1 ")]
    assert said and not any("waiting" in m for m in said), said
