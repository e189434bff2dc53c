"""A parameter-server run resumed under another mode than its checkpoint's: the worker learns
its shards' mode and staleness at setup, after the checkpoint is restored, so the resume compares
the checkpoint's scheme with the shards' there. A resume under the shards' own scheme says
nothing; one under sync-mode shards says both, and the epoch's line keeps the async steps'
scheme and their push counts."""

from __future__ import annotations

import logging
import signal

import numpy as np
import pytest
from ps_helpers import insecure_worker, small_net

from distconv.metrics import read_metrics
from distconv.resume import Preempted
from distconv.trainer import Trainer
from tests.signals import signal_at

RNG = np.random.default_rng(3)
#: 16 examples in batches of 4: four steps an epoch
DATA = {"image": RNG.standard_normal((16, 1, 8, 8)), "label": RNG.integers(0, 4, 16)}


@pytest.mark.timeout(60)
def test_a_resume_under_sync_shards_of_an_async_checkpoint_says_both(shards, tmp_path, caplog):
    out = tmp_path / "run"

    def fit(mode: str, stop: int | None = None) -> str:
        """Fit epoch 1 on a fresh shard in ``mode`` (async: staleness 0), resuming what is
        there, up to a SIGTERM after step ``stop``; what the resume warned."""
        extra = ["--max-staleness", "0"] if mode == "async" else []
        sync = insecure_worker(shards.start(1, workers=1, mode=mode, extra=extra))
        trainer = Trainer(small_net(), sync, 4, out_dir=out, progress=False)
        caplog.clear()
        try:
            with (
                caplog.at_level(logging.WARNING, logger="distconv.resume"),
                caplog.at_level(logging.INFO, logger="distconv.trainer"),
            ):
                if stop is None:
                    trainer.fit(DATA, epochs=1, resume="auto")
                else:
                    signal_at(trainer, stop, signal.SIGTERM)
                    with pytest.raises(Preempted):
                        trainer.fit(DATA, epochs=1, resume="auto")
        finally:
            sync.close()
        return caplog.text

    async_ = {"sync": "pserver", "mode": "async", "max_staleness": 0}
    fit("async", stop=1)
    assert "sync scheme" not in fit("async", stop=2)  # the same, once the shards said it
    said = fit("sync")
    assert "resuming after step 2 under another sync scheme" in said, said
    assert '"mode": "async", "max_staleness": 0} then' in said
    assert '{"sync": "pserver", "mode": "sync"} now' in said
    (line,) = read_metrics(out / "metrics.jsonl")
    assert line["scheme"] == {"sync": "pserver", "mode": "sync"}
    assert line["earlier_schemes"] == [{"scheme": async_, "to_step": 2}]
    # the two async steps' pushes, which the checkpoint carried, are the epoch's (one a step)
    assert (line["push_messages_applied"], line["push_messages_dropped"]) == (2, 0), line
    assert "pushes 2 applied, 0 dropped (its async steps, to step 2)" in said, said
