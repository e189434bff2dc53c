"""A shard's stats tell async SGD's staleness: ``updates_by_staleness`` counts the updates
applied at each staleness, ``push_messages_applied`` and ``push_messages_dropped`` count push
messages (``drops`` counts parameters). Two workers push in a known order, one after the
other, so each push's staleness is known; a sync run counts none of it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest
from hand_shard import BLOCKS
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps
from test_ps_push_versions import _push

from distconv.sync.ps.async_updates import TOP_STALENESS


def _step(net, sync, rng, count: int = 4, first: int = 0) -> None:
    """One step of ``sync`` pushing a random gradient of each of ``net``'s parameters from
    index ``first`` on, the sum of ``count`` examples."""
    sync.start_step(count)
    for p in net.parameters()[first:]:
        p.grad[...] = rng.standard_normal(p.shape)
        sync.on_gradient(p)
    sync.finish_step()


def _on_shard(sync, shard: int) -> int:
    """How many parameters have blocks on ``shard``: a push to it carries that many."""
    return len({b.param for b in sync.layout.blocks_on(shard)})


@contextlib.contextmanager
def async_pair(shards, servers: int, seed: int) -> Iterator[tuple[list, list, np.random.Generator]]:
    """Two async workers (bound 1) of ``servers`` fresh shards, set up on small nets: yields
    their nets, their syncs and a generator of ``seed`` for their gradients; closes the syncs."""
    endpoints = shards.start(servers, workers=2, mode="async", extra=["--max-staleness", "1"])
    nets = [small_net(), small_net()]
    syncs = [insecure_worker(endpoints, r, 2) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        yield nets, syncs, np.random.default_rng(seed)
    finally:
        for sync in syncs:
            sync.close()


def _async_counts(stats: dict) -> tuple:
    keys = ("updates_by_staleness", "push_messages_applied", "push_messages_dropped", "drops")
    return tuple(stats[k] for k in keys)


@pytest.mark.timeout(60)
def test_two_workers_staleness_is_counted_per_update_and_per_push(shards):
    with async_pair(shards, 2, seed=3) as (nets, syncs, rng):
        before = syncs[0].shard_stats()
        # the blocks' version, and what the pushing rank last received of it: staleness
        for rank in (
            0,  # 0, 0: 0
            1,  # 1, 0: 1, applied
            1,  # 2, 2: 0
            0,  # 3, 1: 2, over the bound 1: dropped (its reply brings version 3)
            0,  # 3, 3: 0
            1,  # 4, 3: 1
        ):
            _step(nets[rank], syncs[rank], rng)
        after = syncs[1].shard_stats()
        drops = syncs[0].drops
    assert [_async_counts(s) for s in before] == [([0, 0], 0, 0, 0)] * 2
    carried = [_on_shard(syncs[0], s) for s in range(2)]
    assert all(carried)  # each shard holds blocks of some parameter: a push to each, each step
    for n, stats in zip(carried, after):  # each shard counts its own push messages
        assert _async_counts(stats) == ([3 * n, 2 * n], 5, 1, n)
        assert (stats["push_messages"], stats["pushes"], stats["updates"]) == (6, 6 * n, 5 * n)
    assert drops == sum(carried)  # the worker's count is per parameter and shard


@pytest.mark.timeout(60)
def test_a_push_partly_applied_counts_as_applied_and_one_of_no_example_as_neither(shards):
    """Rank 1 leaves the first parameter out, so rank 0's push finds it fresh and the others
    two updates on: it applies one and drops the rest. Rank 0's next push, of no example,
    applies nothing and drops nothing."""
    with async_pair(shards, 1, seed=4) as (nets, syncs, rng):
        _step(nets[1], syncs[1], rng, first=1)
        _step(nets[1], syncs[1], rng, first=1)
        _step(nets[0], syncs[0], rng)
        _step(nets[0], syncs[0], rng, count=0)  # every version current: within the bound
        (stats,) = syncs[0].shard_stats()
    n = len(nets[0].parameters())
    assert n > 2
    assert _async_counts(stats) == ([2 * (n - 1) + 1, 0], 3, 0, n - 1)
    assert (stats["push_messages"], stats["updates"]) == (4, 2 * (n - 1) + 1)


@pytest.mark.timeout(60)
def test_staleness_past_the_top_counts_in_the_last_entry(hand):
    """A bound of 1000 ("never drop") keeps the histogram at 65 entries: 64 and more stale
    count in the last, 63 in its own. Read as the wire carries it: plain ints."""
    h = hand(mode="async", max_staleness=1000)
    h.seed()
    for step in range(1, 71):  # each on the newest version: 70 updates at staleness 0
        assert h.ask(*_push(step, [step - 1] * BLOCKS))[0]["dropped"] == 0
    for step, staleness in ((71, 63), (72, 64), (73, 70)):  # the blocks are at step - 1
        assert h.ask(*_push(step, [step - 1 - staleness] * BLOCKS))[0]["dropped"] == 0
    reply, _ = h.ask({"op": "stats"})
    counts = reply["stats"]["updates_by_staleness"]
    assert counts == [70] + [0] * 62 + [1, 2]
    assert len(counts) == TOP_STALENESS + 1 and all(type(c) is int for c in counts)
    assert (reply["stats"]["push_messages_applied"], reply["stats"]["drops"]) == (73, 0)


@pytest.mark.timeout(60)
def test_a_sync_run_counts_no_staleness(shards):
    endpoints = shards.start(1, workers=1)
    net, sync = small_net(), insecure_worker(endpoints)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(2, 4))
        (stats,) = sync.shard_stats()
    finally:
        sync.close()
    assert _async_counts(stats) == ([], 0, 0, 0)
    n = len(net.parameters())
    assert (stats["push_messages"], stats["pushes"], stats["updates"]) == (2, 2 * n, 2 * n)
