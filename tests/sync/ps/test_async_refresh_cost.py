"""What an async refresh asks the shards after other ranks' steps, with none of its own:
each shard's ``stats`` once, then the pull. It asked ``stats`` twice: once to see
whether a count moved, and again at the start of the pull it then made. Real shard process.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.sync.ps.client import PServerSync


def counted(sync: PServerSync) -> Counter:
    """The ops of the requests ``sync`` sends from now on, counted (a wrapper on its ``_send``)."""
    ops: Counter = Counter()
    send = sync._send

    def counting(shard: int, header: dict[str, Any], *args: Any, **kwargs: Any) -> int:
        ops[header["op"]] += 1
        return send(shard, header, *args, **kwargs)

    sync._send = counting
    return ops


@pytest.mark.timeout(60)
def test_a_refresh_after_other_ranks_steps_asks_each_shards_stats_once(shards):
    endpoints = shards.start(2, 2, mode="async")
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker(endpoints, r, 2) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)  # rank 1 pulls here
        train_steps(nets[0], syncs[0], batches(1, 8), 0, 2)
        ops = counted(syncs[1])
        syncs[1].refresh_parameters()  # no step of its own since its pull: the counts moved
        assert ops["stats"] == 2, ops  # one per shard
        assert ops["pull"] >= 2, ops  # and the pull
        ops.clear()
        syncs[1].refresh_parameters()  # nothing moved since: the counts alone
        assert ops == Counter(stats=2), ops
    finally:
        for s in syncs:
            s.close()
