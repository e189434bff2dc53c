"""The Trainer on ragged sentences through a synchronous parameter server (real shards on
127.0.0.1, workers in threads): two workers train as one process (a loop written by hand that
feeds the same sentences) where a worker's share of a step is only empty sentences (it hands
every gradient over, zero, without a forward) and a step holds no token at all (skipped by both
alike: the shard waits for no push of it), and where worker 0's share of the first step is
only empty sentences."""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, run_ranks

from distconv.equivalence import mismatch, weights
from distconv.trainer import Trainer
from tests.sequence_tagger import (
    GLOBAL,
    OPTIMIZER,
    RANK0_EMPTY_FIRST,
    by_hand,
    lengths_in_order,
    tagged_set,
    tagger,
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("lengths", [(), RANK0_EMPTY_FIRST], ids=["", "rank0_empty"])
def test_two_workers_train_ragged_sentences_as_one_process(shards, lengths):
    data = tagged_set(lengths_in_order(lengths) if lengths else ())
    expected = by_hand(tagger(), data, 2)
    endpoints = shards.start(1, 2, mode="sync")
    nets = [tagger(0), tagger(100)]  # built here: one model's draws at a time; alike by setup

    def rank(r: int) -> dict:
        sync = insecure_worker(endpoints, r, 2, optimizer=OPTIMIZER["name"], lr=OPTIMIZER["lr"])
        try:
            trainer = Trainer(nets[r], sync, GLOBAL // 2, progress=False, dtype="float64")
            trainer.fit(data, epochs=2)
            return weights(nets[r])
        finally:
            sync.close()

    for got in run_ranks(rank, 2):
        assert (wrong := mismatch(expected, got, 1e-10)) is None, wrong
