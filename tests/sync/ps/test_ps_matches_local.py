"""The parameter server passes the equivalence check (:mod:`distconv.equivalence`): 2 workers,
each a process of its own, through 2 real shards on 127.0.0.1, end with the weights of one
process on twice the batch (float64, Adam with a decaying rate, an uneven last step), and so
do 2 workers stopped mid-epoch and resumed by new workers on 2 shards started afresh
(``RESUMED_JOB``): Adam's state reaches the new shards from the chief's checkpoint alone."""

from __future__ import annotations

import functools

import pytest
from ps_helpers import pserver_sync, restarted_pserver_sync

from distconv.equivalence import (
    JOB,
    RESUMED_JOB,
    assert_matches_local,
    max_relative_difference,
    weights,
)


@pytest.mark.timeout(90)
def test_two_worker_processes_on_two_shards_match_one_process(shards):
    endpoints = shards.start(2, workers=2)
    ranks = assert_matches_local(functools.partial(pserver_sync, endpoints), 2, timeout=60)
    assert max_relative_difference(ranks[1], weights(JOB.model_of(0))) > 1e-2  # it trained


@pytest.mark.timeout(90)
def test_two_workers_stopped_and_resumed_on_new_shards_match_one_process(shards):
    first, then = shards.start(2, workers=2), shards.start(2, workers=2)
    make = functools.partial(restarted_pserver_sync, first, then)
    ranks = assert_matches_local(make, 2, RESUMED_JOB, timeout=60)
    assert max_relative_difference(ranks[1], weights(JOB.model_of(0))) > 1e-2  # it trained
