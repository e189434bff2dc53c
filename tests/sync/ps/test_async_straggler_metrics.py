"""An asynchronous job with a straggler: where the fast worker's time went, and what async SGD
did, are in its metrics. Rank 1 sleeps in each step; rank 0, the chief, runs ahead until the
stop check every ``STOP_CHECK_EVERY`` steps and the epoch's metric sums, where it waits for rank
1. Its ``sync_seconds`` did not count that wait, and nothing else did: now each epoch's record
has each rank's ``collective_seconds``, and ``traffic()`` the running total. The record also
counts the epoch's pushes applied and dropped over the ranks, where it had the step alone,
which reads the same in a sync run of as many steps. Real shards, two Trainers as threads."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, small_net

from distconv.epoch_sums import PUSH_COUNTS as PUSHES
from distconv.metrics import read_metrics
from distconv.optim import create_optimizer
from distconv.service import ServiceEndpoints
from distconv.stop_agreement import STOP_CHECK_EVERY
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.test_collective_seconds import served_collective_seconds

#: rank 1's sleep in each of its steps
SLEEP = 0.05
#: examples per rank and step, and steps per epoch
BATCH, STEPS = 4, 2 * STOP_CHECK_EVERY


class Straggler(Trainer):
    """A Trainer whose every step takes :data:`SLEEP` more (a slower machine)."""

    def train_step(self, arrays, passes):
        time.sleep(SLEEP)
        return super().train_step(arrays, passes)


class Leader(Trainer):
    """A Trainer that tells a :class:`Follower` of each step it finished."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.stepped = threading.Condition()

    def train_step(self, arrays, passes):
        done = super().train_step(arrays, passes)
        with self.stepped:
            self.stepped.notify_all()
        return done


class Follower(Straggler):
    """A straggler that starts each step once the leader finished that step: its push then
    always finds the leader's push of that step on the shards; where that came after the
    follower's last reply (the first step after an epoch's start or a stop check, where the
    two met), the follower's push is a whole update stale."""

    leader: Leader

    def train_step(self, arrays, passes):
        with self.leader.stepped:
            if not self.leader.stepped.wait_for(lambda: self.leader.pos.step > self.pos.step, 30):
                raise TimeoutError(f"the leader did not finish step {self.pos.step + 1}")
        return super().train_step(arrays, passes)


def straggler_run(
    shards,
    tmp_path,
    epochs: int = 1,
    servers: int = 1,
    staleness: int = 1000,
    lockstep=False,
    monitor=None,
) -> tuple[list[dict], list, list[dict]]:
    """Two workers of ``servers`` shards (async, ``staleness`` the bound) train ``epochs``
    epochs, rank 1 the straggler (a :class:`Follower` of rank 0 where ``lockstep``), the chief
    reporting to ``monitor``: the chief's metrics lines, the syncs (closed), and the shards'
    stats at the end."""
    extra = ["--max-staleness", str(staleness)]
    endpoints = shards.start(servers, workers=2, mode="async", extra=extra)
    syncs = [insecure_worker(endpoints, r, 2, lr=0.01) for r in range(2)]
    out = tmp_path / "run"
    kinds = (Leader, Follower) if lockstep else (Trainer, Straggler)
    trainers = [
        kinds[r](
            small_net(),
            syncs[r],
            BATCH,
            out_dir=out if r == 0 else None,
            progress=False,
            monitor=monitor if r == 0 else None,
        )
        for r in range(2)
    ]
    if lockstep:
        trainers[1].leader = trainers[0]
    return fit_ranks(trainers, syncs, straggler_data(), epochs, out)


def straggler_data() -> dict[str, np.ndarray]:
    """:data:`STEPS` steps of two ranks' :data:`BATCH` examples for :func:`small_net`."""
    rng = np.random.default_rng(3)
    examples = 2 * BATCH * STEPS
    return {
        "image": rng.standard_normal((examples, 1, 8, 8)),
        "label": rng.integers(0, 4, examples),
    }


def fit_ranks(
    trainers, syncs, data, epochs: int, out, **fit: Any
) -> tuple[list[dict], list, list[dict]]:
    """Each of ``trainers`` (a rank's, on ``syncs``) fits ``data`` for ``epochs`` epochs (``fit``:
    its other arguments, as ``resume``), as threads: the chief's metrics lines (in ``out``), the
    syncs (closed), the shards' stats."""
    try:
        run_ranks(lambda r: trainers[r].fit(data, epochs=epochs, **fit), len(trainers))
        stats = syncs[0].shard_stats()
    finally:
        for sync in syncs:
            sync.close()
    return read_metrics(out / "metrics.jsonl"), syncs, stats


@pytest.mark.timeout(120)
def test_the_fast_workers_wait_for_a_straggler_is_its_collective_seconds(shards, tmp_path):
    monitor = ServiceEndpoints()  # not served: its counters are read here
    (line,), syncs, _ = straggler_run(shards, tmp_path, monitor=monitor)
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
    # /metrics has every wait, the epoch end's too (it was counted only at a step after it, so
    # the last epoch's fold, rates' sum and checkpoint barrier never reached it), and the
    # histogram of step syncs one sample a step, none for the epoch's end
    assert served_collective_seconds(monitor) == pytest.approx(syncs[0].collective_seconds)
    labels = {"role": monitor.role, "rank": str(monitor.rank)}
    count = monitor.registry.get_sample_value("distconv_allreduce_seconds_count", labels)
    assert count == STEPS


@pytest.mark.timeout(120)
def test_an_async_epochs_pushes_applied_and_dropped_are_summed_over_ranks(shards, tmp_path, caplog):
    """Two shards, bound 0, two epochs: the straggler's push of each epoch's first step is
    dropped whole on both shards (the leader's push of that step moved every block after the
    straggler's pull), and every push is either applied or dropped (each step has examples).
    The lines add up to the workers' counts and to the shards', each epoch's its own; the
    epoch's log line says them, and the waits."""
    with caplog.at_level(logging.INFO, logger="distconv.trainer"):
        lines, syncs, stats = straggler_run(
            shards, tmp_path, 2, servers=2, staleness=0, lockstep=True
        )
    assert [line["step"] for line in lines] == [STEPS, 2 * STEPS]
    applied, dropped = (sum(line[k] for line in lines) for k in PUSHES)
    assert all(line["push_messages_dropped"] >= 2 for line in lines), lines
    assert all(line["push_messages_applied"] > 0 for line in lines), lines
    made = sum(sync.push_messages for sync in syncs)
    assert applied + dropped == made == 2 * 2 * 2 * STEPS  # ranks, shards, epochs' steps
    assert [applied, dropped] == [sum(s.traffic()[k] for s in syncs) for k in PUSHES]
    assert [applied, dropped] == [sum(s[k] for s in stats) for k in PUSHES]
    said = [r.getMessage() for r in caplog.records if r.name == "distconv.trainer"]
    for line in lines:  # each rank logs the epoch's line, the same on each
        exchanged = max(line["sync_seconds_per_rank"])
        waited = f"({exchanged:.1f}s waiting in step exchanges, {line['collective_seconds']:.1f}s"
        pushes = "pushes {push_messages_applied} applied, {push_messages_dropped} dropped"
        ours = [m for m in said if m.startswith(f"epoch {line['epoch']}/")]
        assert ours and all(waited in m and m.endswith(pushes.format(**line)) for m in ours), said


@pytest.mark.timeout(60)
def test_a_sync_or_local_run_records_no_push_counts(shards, tmp_path):
    """Push counts are an asynchronous run's: the lines of a LocalSync run and of two workers
    of synchronous shards have none (each step is one update there, none is dropped)."""
    rng = np.random.default_rng(3)
    data = {"image": rng.standard_normal((16, 1, 8, 8)), "label": rng.integers(0, 4, 16)}
    local = Trainer(
        small_net(),
        LocalSync(create_optimizer("sgd", lr=0.05)),
        8,
        out_dir=tmp_path / "local",
        progress=False,
    )
    local.fit(data)
    endpoints = shards.start(1, workers=2)
    syncs = [insecure_worker(endpoints, r, 2) for r in range(2)]
    out = tmp_path / "sync"
    trainers = [
        Trainer(small_net(), syncs[r], 4, out_dir=out if r == 0 else None, progress=False)
        for r in range(2)
    ]
    try:
        run_ranks(lambda r: trainers[r].fit(data), 2)
    finally:
        for sync in syncs:
            sync.close()
    for run, scheme in ((tmp_path / "local", "local"), (out, "pserver")):
        (line,) = read_metrics(run / "metrics.jsonl")
        assert line["scheme"]["sync"] == scheme and line["scheme"].get("mode") != "async", line
        assert not set(PUSHES) & set(line), line
