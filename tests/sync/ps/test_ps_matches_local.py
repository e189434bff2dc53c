"""The parameter server passes the equivalence check (:mod:`distconv.equivalence`): 2 workers,
each a process of its own, through 2 real shards on 127.0.0.1, end with the weights of one
process on twice the batch (float64, Adam with a decaying rate, an uneven last step)."""

from __future__ import annotations

import functools

import pytest
from ps_helpers import pserver_sync

from distconv.equivalence import JOB, assert_matches_local, max_relative_difference, weights


@pytest.mark.timeout(90)
def test_two_worker_processes_on_two_shards_match_one_process(shards):
    endpoints = shards.start(2, workers=2)
    ranks = assert_matches_local(functools.partial(pserver_sync, endpoints), 2, timeout=60)
    assert max_relative_difference(ranks[1], weights(JOB.model_of(0))) > 1e-2  # it trained
