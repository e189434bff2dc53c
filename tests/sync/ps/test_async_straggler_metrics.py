"""An asynchronous job with a straggler: where the fast worker's time went is in its metrics.
Rank 1 sleeps in each step; rank 0, the chief, runs ahead until the stop check every
``STOP_CHECK_EVERY`` steps and the epoch's metric sums, where it waits for rank 1. Its
``sync_seconds`` did not count that wait, and nothing else did: now each epoch's record has
each rank's ``collective_seconds``, and ``traffic()`` the running total. Real shards, two
Trainers as threads."""

from __future__ import annotations

import time

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, small_net

from distconv.metrics import read_metrics
from distconv.stop_agreement import STOP_CHECK_EVERY
from distconv.trainer import Trainer

#: rank 1's sleep in each of its steps
SLEEP = 0.05
#: examples per rank and step, and steps per epoch
BATCH, STEPS = 4, 2 * STOP_CHECK_EVERY


class Straggler(Trainer):
    """A Trainer whose every step takes :data:`SLEEP` more (a slower machine)."""

    def train_step(self, arrays, passes):
        time.sleep(SLEEP)
        return super().train_step(arrays, passes)


def straggler_run(shards, tmp_path, epochs: int = 1) -> tuple[list[dict], list, list[dict]]:
    """Two workers of one shard (async, no drop) train ``epochs`` epochs, rank 1 the straggler:
    the chief's metrics lines, the syncs (closed), and the shard's stats at the end."""
    (endpoint,) = shards.start(1, workers=2, mode="async", extra=["--max-staleness", "1000"])
    rng = np.random.default_rng(3)
    examples = 2 * BATCH * STEPS
    data = {
        "image": rng.standard_normal((examples, 1, 8, 8)),
        "label": rng.integers(0, 4, examples),
    }
    syncs = [insecure_worker([endpoint], r, 2, lr=0.01) for r in range(2)]
    out = tmp_path / "run"
    kinds = (Trainer, Straggler)
    trainers = [
        kinds[r](small_net(), syncs[r], BATCH, out_dir=out if r == 0 else None, progress=False)
        for r in range(2)
    ]
    try:
        run_ranks(lambda r: trainers[r].fit(data, epochs=epochs), 2)
        stats = syncs[0].shard_stats()
    finally:
        for sync in syncs:
            sync.close()
    return read_metrics(out / "metrics.jsonl"), syncs, stats


@pytest.mark.timeout(120)
def test_the_fast_workers_wait_for_a_straggler_is_its_collective_seconds(shards, tmp_path):
    (line,), syncs, _ = straggler_run(shards, tmp_path)
    assert line["step"] == STEPS
    waits = line["collective_seconds_per_rank"]
    assert len(waits) == 2 and line["collective_seconds"] == max(waits)
    # rank 1 slept SLEEP in each of the STOP_CHECK_EVERY steps before each stop check, where
    # rank 0 waited for it: at least half of one such wait, a wide margin
    assert waits[0] > SLEEP * STOP_CHECK_EVERY / 2
    assert waits[1] > 0  # the straggler waits too, at least in the sums themselves
    assert line["collective_seconds"] < line["seconds"]
    # the running totals hold the epoch's waits (and the rates' sum after them)
    for sync, waited in zip(syncs, waits):
        assert sync.traffic()["collective_seconds"] >= waited
