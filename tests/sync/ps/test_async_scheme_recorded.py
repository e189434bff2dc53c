"""A parameter-server run records the scheme it ran: the first metrics line has the shards'
mode and staleness, learnt from their hello (the worker has no flag of its own for them), and
the worker's setup line says them, as its checkpoints' metadata does. Metrics of async and
sync runs had the same keys, and the start line said "pserver sync" in async mode too;
a checkpoint said none of it."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from ps_helpers import insecure_worker, small_net

from distconv.checkpoint import load_checkpoint
from distconv.job import scheme_text
from distconv.metrics import read_metrics
from distconv.sync.description import sync_scheme
from distconv.trainer import Trainer


@pytest.mark.timeout(120)
def test_an_async_run_records_the_shards_mode_and_staleness(shards, tmp_path, caplog):
    endpoints = shards.start(1, workers=1, mode="async", extra=["--max-staleness", "0"])
    sync = insecure_worker(endpoints)
    # before setup the worker knows neither: the start line says whose they are
    assert sync_scheme(sync) == {"sync": "pserver"}
    assert "the shards'" in scheme_text(sync_scheme(sync))
    rng = np.random.default_rng(3)
    data = {"image": rng.standard_normal((16, 1, 8, 8)), "label": rng.integers(0, 4, 16)}
    trainer = Trainer(small_net(), sync, 8, out_dir=tmp_path / "run", progress=False)
    try:
        with caplog.at_level(logging.INFO, logger="distconv.pserver"):
            trainer.fit(data, epochs=2)
    finally:
        sync.close()
    first, second = read_metrics(tmp_path / "run" / "metrics.jsonl")
    scheme = {"sync": "pserver", "mode": "async", "max_staleness": 0}
    assert first["scheme"] == scheme, first
    # the scheme in force when it was written: the shards', learnt at setup
    assert load_checkpoint(trainer.checkpoints.run.latest().part("chief")).extra["scheme"] == scheme
    assert "scheme" not in second  # once, where the run's metrics start
    assert "(async mode, max staleness 0)" in caplog.text
