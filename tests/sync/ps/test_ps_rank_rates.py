"""Sync mode compares the ranks' learning rates at every step: a schedule that reads a
rank-local value (here the rank) fails the job on every rank, naming the step, both ranks
and both rates, with nothing updated; ranks that set the same schedule train as one process
does. Real shard processes on 127.0.0.1, two workers in threads."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ps_helpers import batches, run_ranks, small_net, train_steps
from ps_helpers import small_block_sync as _sync

from distconv.equivalence import mismatch, weights
from distconv.optim import create_optimizer
from distconv.sync.errors import JobRefused
from distconv.sync.local import LocalSync

#: the way out the refusal names (the words, not imported from the code under test)
SAME_FACTOR = "every rank must set the same lr factor (set_lr_scale) at every step"


def factor(step: int) -> float:
    """A per-step schedule every rank computes alike (a cosine over the steps)."""
    return 0.5 * (1 + math.cos(math.pi * step / 7))


def schedule_steps(net, sync, data, rank: int, world: int, skew: bool) -> None:
    """``train_steps``, one step at a time, setting the schedule's factor before each;
    ``skew``: times ``1 + rank`` (a rank-local value, as a researcher's bug reads one)."""
    for step, batch in enumerate(data):
        sync.set_lr_scale(factor(step) * (1 + rank if skew else 1))
        train_steps(net, sync, [batch], rank, world)


def test_ranks_at_different_rates_are_refused_on_every_rank_naming_both(shards):
    endpoints = shards.start(2, workers=2)
    data = batches(3, 8)
    nets = [small_net(), small_net()]  # here: the global seed is no thread's to share
    before = weights(small_net())

    def rank(r: int) -> tuple[str, dict]:
        net, sync = nets[r], _sync(endpoints, r, 2)
        try:
            sync.setup(net.parameters())
            with pytest.raises(JobRefused) as refused:
                schedule_steps(net, sync, data, r, 2, skew=True)
            return str(refused.value), weights(net)
        finally:
            sync.close()

    said = run_ranks(rank, 2, timeout=60)
    for text, after in said:
        # the first step: factor(0) = 1, so rank 0 at 0.05, rank 1 at 0.1
        assert "rank 0 trains at lr 0.05 and rank 1 at lr 0.1" in text, text
        assert "learning rates differ" in text and SAME_FACTOR in text, text
        assert "step 1" in text, text  # the run's first step, as the pushes number it
        assert mismatch(before, after) is None  # refused before any update
    # the same refusal on both ranks; each shard fails the job on its own parameters, and a
    # worker says the first shard's answer it got: which shard and parameter may differ
    assert said[0][0].partition("sync step")[2] == said[1][0].partition("sync step")[2]


def test_ranks_that_set_the_same_schedule_train_as_one_process(shards):
    endpoints = shards.start(2, workers=2)
    data = batches(4, 8)
    nets = [small_net(), small_net()]

    def rank(r: int) -> dict:
        net, sync = nets[r], _sync(endpoints, r, 2)
        try:
            sync.setup(net.parameters())
            schedule_steps(net, sync, data, r, 2, skew=False)
            return weights(net)
        finally:
            sync.close()

    ranks = run_ranks(rank, 2, timeout=60)
    ref = small_net()
    local = LocalSync(create_optimizer("sgd", lr=0.05))
    local.setup(ref.parameters())
    schedule_steps(ref, local, data, 0, 1, skew=False)
    for trained in ranks:
        assert (wrong := mismatch(weights(ref), trained)) is None, wrong
    assert all(np.array_equal(ranks[0][k], ranks[1][k]) for k in ranks[0])
