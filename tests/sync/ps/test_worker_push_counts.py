"""A worker counts its own async pushes as the shards count theirs: ``push_messages_applied``
(the shard applied at least one parameter of it) and ``push_messages_dropped`` (every one), in
``traffic()`` and ``/metrics`` beside ``stale_dropped`` (one per parameter and shard). Before,
a worker had only that per-parameter count: 12 pushes dropped whole read 96. Real shards; the
pushes go in a known order, so each one's staleness is known
(``test_async_staleness_stats.py``)."""

from __future__ import annotations

import pytest
from ps_helpers import batches, insecure_worker, small_net, train_steps
from test_async_staleness_stats import _on_shard, _step, async_pair

from distconv.service import ServiceEndpoints

PUSHES = ("push_messages_applied", "push_messages_dropped")


def _pushes(counts: dict) -> tuple[int, int]:
    return counts[PUSHES[0]], counts[PUSHES[1]]


def _served(totals: dict) -> tuple[float, float]:
    """What ``/metrics`` says of the push counts after ``record_totals(totals)``."""
    service = ServiceEndpoints(role="worker", rank=0)
    service.record_totals(totals)
    labels = {"role": "worker", "rank": "0"}
    applied, dropped = (
        service.registry.get_sample_value(f"distconv_{k}_total", labels) for k in PUSHES
    )
    return applied, dropped


@pytest.mark.timeout(60)
def test_each_workers_pushes_applied_and_dropped_add_up_to_the_shards(shards):
    """Two shards, bound 1: rank 0's second step is two updates stale on both shards, so both
    its push messages are dropped whole; every other push is applied."""
    with async_pair(shards, 2, seed=3) as (nets, syncs, rng):
        for rank in (0, 1, 1, 0, 0, 1):  # rank 0's second push: 2 updates stale
            _step(nets[rank], syncs[rank], rng)
        stats = syncs[0].shard_stats()
        totals = [s.traffic() for s in syncs]
    assert [_pushes(t) for t in totals] == [(4, 2), (6, 0)]
    for sync, t in zip(syncs, totals):  # every push made is one or the other
        assert sum(_pushes(t)) == sync.push_messages == 6
    on_shards = [sum(s[k] for s in stats) for k in PUSHES]
    assert on_shards == [sum(t[k] for t in totals) for k in PUSHES] == [10, 2]
    # stale_dropped keeps its meaning: one per parameter and shard
    assert totals[0]["stale_dropped"] == sum(_on_shard(syncs[0], s) for s in range(2))
    assert totals[1]["stale_dropped"] == 0
    assert _served(totals[0]) == (4, 2)


@pytest.mark.timeout(60)
def test_a_push_partly_dropped_is_applied_and_one_of_no_example_neither(shards):
    """Rank 1 leaves the first parameter out twice: rank 0's push then applies that one and
    drops the rest (applied, as the shard counts it); its next push, of no example, applies
    nothing and drops nothing; its third, of no example either, two updates stale after rank
    1's, is dropped whole."""
    with async_pair(shards, 1, seed=4) as (nets, syncs, rng):
        _step(nets[1], syncs[1], rng, first=1)
        _step(nets[1], syncs[1], rng, first=1)
        _step(nets[0], syncs[0], rng)
        _step(nets[0], syncs[0], rng, count=0)
        _step(nets[1], syncs[1], rng)
        _step(nets[1], syncs[1], rng)
        _step(nets[0], syncs[0], rng, count=0)
        (stats,) = syncs[0].shard_stats()
        totals = [s.traffic() for s in syncs]
    assert [_pushes(t) for t in totals] == [(1, 1), (4, 0)]
    assert _pushes(stats) == (5, 1)
    assert stats["push_messages"] == 7  # the push of no example within the bound: in neither


@pytest.mark.timeout(60)
def test_a_sync_run_counts_no_pushes_applied_or_dropped(shards):
    """A sync worker's ``traffic()`` has no push counts: its shard applied every push, and a 0
    there read as none applied. ``/metrics`` serves its counters at 0 (documented)."""
    endpoints = shards.start(1, workers=1)
    net, sync = small_net(), insecure_worker(endpoints)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(2, 4))
    finally:
        sync.close()
    assert sync.push_messages == 2
    assert not set(PUSHES) & set(sync.traffic()), sync.traffic()
    assert _served(sync.traffic()) == (0, 0)
