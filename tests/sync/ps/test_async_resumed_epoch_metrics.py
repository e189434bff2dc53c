"""An asynchronous epoch stopped in its middle and resumed: its line covers the whole epoch.

Its ``seconds`` and rates did (the checkpoint carries ``seconds``), but its push counts and its
waits counted only the steps since the resume, so ``collective_seconds / seconds`` and the push
totals read wrong: the line's pushes were the second shards' alone. The checkpoint now carries
the push counts and each rank's waits. Real shards, two Trainers: rank 0 here (the main thread,
where its SIGTERM handler runs), rank 1 a straggler in a thread in the first run, stopped at the
stop check after step ``STOP_CHECK_EVERY``; the second run, on fresh shards, resumes the epoch
without a straggler."""

from __future__ import annotations

import concurrent.futures
import signal

import pytest
from ps_helpers import insecure_worker, small_net
from test_async_straggler_metrics import (
    BATCH,
    SLEEP,
    STEPS,
    Straggler,
    fit_ranks,
    straggler_data,
)

from distconv.epoch_sums import PUSH_COUNTS as PUSHES
from distconv.resume import Preempted
from distconv.stop_agreement import STOP_CHECK_EVERY
from distconv.trainer import Trainer
from tests.signals import signal_at


def _ranks(shards, out, kinds: tuple[type[Trainer], type[Trainer]]) -> tuple[list, list]:
    """Two workers on a fresh async shard (bound 0: pushes are dropped too), the chief writing
    to ``out``: the trainers (of ``kinds``) and their syncs."""
    endpoints = shards.start(1, workers=2, mode="async", extra=["--max-staleness", "0"])
    syncs = [insecure_worker(endpoints, r, 2, lr=0.01) for r in range(2)]
    trainers = [
        kind(small_net(), sync, BATCH, out_dir=out if r == 0 else None, progress=False)
        for r, (kind, sync) in enumerate(zip(kinds, syncs))
    ]
    return trainers, syncs


def _stopped(trainers, syncs, data) -> list[dict]:
    """Fit one epoch, rank 0 sent SIGTERM after its first step: both ranks stop at the next
    stop check, with a checkpoint; the shards' stats then, the syncs closed."""
    signal_at(trainers[0], 1, signal.SIGTERM)
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            rank_1 = pool.submit(trainers[1].fit, data, epochs=1)
            with pytest.raises(Preempted, match=f"(?m)after step {STOP_CHECK_EVERY}$"):
                trainers[0].fit(data, epochs=1)
            with pytest.raises(Preempted):
                rank_1.result(timeout=60)
        return syncs[0].shard_stats()
    finally:
        for sync in syncs:
            sync.close()


@pytest.mark.timeout(120)
def test_a_resumed_epochs_line_counts_the_pushes_and_waits_of_the_whole_epoch(shards, tmp_path):
    out, data = tmp_path / "run", straggler_data()
    before = _stopped(*_ranks(shards, out, (Trainer, Straggler)), data)
    trainers, syncs = _ranks(shards, out, (Trainer, Trainer))
    (line,), _, after = fit_ranks(trainers, syncs, data, 1, out, resume=True)
    assert line["step"] == STEPS
    counted = [stats[k] for stats in (*before, *after) for k in PUSHES]
    assert sum(counted[: len(PUSHES)]) > 0 and sum(counted[len(PUSHES) :]) > 0  # both runs
    assert [line[k] for k in PUSHES] == [sum(counted[i :: len(PUSHES)]) for i in range(2)]
    # rank 0 waited for the straggler's STOP_CHECK_EVERY sleeps before the stop (at least half
    # of them, a wide margin); the resumed steps had no straggler
    assert line["collective_seconds_per_rank"][0] > SLEEP * STOP_CHECK_EVERY / 2, line
