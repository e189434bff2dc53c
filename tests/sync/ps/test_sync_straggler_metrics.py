"""A synchronous parameter-server job with a rank stalled in one step: each epoch's line of
``metrics.jsonl`` has each rank's wait in its steps' exchange (``sync_seconds_per_rank``),
where the others waited for it, and the epoch's log line says it. The record had the
Trainer's collectives alone, and a 20 s stall read "0.0s waiting in collectives" on every
rank. Real shard on 127.0.0.1, two Trainers as threads."""

from __future__ import annotations

import logging

import pytest
from ps_helpers import insecure_worker, small_net
from test_async_straggler_metrics import BATCH, fit_ranks, straggler_data

from distconv.trainer import Trainer
from tests.stalled_step import StalledTrainer, assert_the_stalled_rank_waited_least

#: rank 1's stall, in seconds
STALL = 1.5


@pytest.mark.timeout(120)
def test_the_others_wait_for_a_stalled_rank_is_in_their_sync_seconds(shards, tmp_path, caplog):
    endpoints = shards.start(1, workers=2, mode="sync")
    syncs = [insecure_worker(endpoints, r, 2, lr=0.01) for r in range(2)]
    out = tmp_path / "run"
    stalled = StalledTrainer(small_net(), syncs[1], BATCH, progress=False)
    stalled.stall = STALL
    chief = Trainer(small_net(), syncs[0], BATCH, out_dir=out, progress=False)
    with caplog.at_level(logging.INFO, logger="distconv.trainer"):
        (line,), _, _ = fit_ranks([chief, stalled], syncs, straggler_data(), 1, out)
    assert_the_stalled_rank_waited_least(line, stalled=1, stall=STALL)
    assert line["collective_seconds"] < STALL / 2, line  # not where the others waited
    most = max(line["sync_seconds_per_rank"])
    said = f"({most:.1f}s waiting in step exchanges, {line['collective_seconds']:.1f}s in "
    ours = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch 1/1 ")]
    assert len(ours) == 2 and all(said in m for m in ours), ours
