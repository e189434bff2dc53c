"""An asynchronous parameter-server run resumed on another number of workers at the same global
batch: each worker's push is an update of its own, so the epochs make another number of
updates, and the scheme (mode, staleness) is unchanged, so its warning did not fire. Each
checkpoint records its world size; the chief warns where an async checkpoint is resumed async
on another, and says nothing of it under a sync scheme."""

from __future__ import annotations

import logging

import pytest
from ps_helpers import insecure_worker, run_ranks, small_net

from distconv.checkpoint import load_checkpoint
from distconv.run_dir import RunDirectory
from distconv.trainer import Trainer
from tests.sync.ps.test_ps_resume_scheme import DATA

#: the warning's first words
OTHER_WORLD = "on another number of workers than its checkpoint's"


@pytest.mark.timeout(60)
def test_an_async_resume_on_another_number_of_workers_says_so(shards, tmp_path, caplog):
    out = tmp_path / "run"

    def fit(mode: str, world: int, epochs: int) -> str:
        """Fit up to ``epochs`` on fresh shards in ``mode`` with ``world`` workers (threads) at
        a global batch of 8, resuming what is there; what the chief warned."""
        endpoints = shards.start(1, workers=world, mode=mode)

        def rank(r: int) -> None:
            sync = insecure_worker(endpoints, r, world)
            trainer = Trainer(small_net(), sync, 8 // world, out_dir=out, progress=False)
            try:
                trainer.fit(DATA, epochs=epochs, resume="auto")
            finally:
                sync.close()

        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="distconv.resume"):
            run_ranks(rank, world, timeout=40)
        extra = load_checkpoint(RunDirectory(out, 3).latest().part("chief")).extra
        assert extra["world_size"] == world  # recorded beside the scheme
        return caplog.text

    assert OTHER_WORLD not in fit("async", 2, 1)
    said = fit("async", 1, 2)
    assert f"resuming after step 2 {OTHER_WORLD}, under the asynchronous scheme" in said, said
    assert "1 worker now, 2 then" in said and "each step makes 1 update where it made 2" in said
    said = fit("sync", 2, 3)  # sync: one update a step, however many workers push
    assert "under another sync scheme" in said and OTHER_WORLD not in said, said
