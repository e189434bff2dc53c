"""An async refresh with no step since its last pull, after its shard restarted.

Such a refresh asks each shard's ``stats`` and pulled nothing where the push count was the one
of its last pull. A shard started again (its pod restarted) counts from 0 again, and a count of
0 is what a rank that pulled at setup, before any step, holds: the refresh returned the old copy
as the new shard's, where a pull is refused (the shard holds no seed). A seed's id in the
``stats`` reply tells a restarted or reseeded shard from the one pulled. Real shard processes.
"""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker, run_ranks, small_net

from distconv.sync.base import SyncError


@pytest.mark.timeout(60)
def test_a_refresh_after_its_shard_restarted_pulls_from_the_new_one(shards):
    (endpoint,) = shards.start(1, 2, mode="async")
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)  # rank 1 pulls at count 0
        shards.procs[0].kill()
        shards.procs[0].wait()
        shards.start(1, 2, mode="async", extra=["--bind", endpoint])  # the same address again
        with pytest.raises(SyncError, match="rank 1, pull: .*shard not seeded yet"):
            syncs[1].refresh_parameters()
    finally:
        for s in syncs:
            s.close()
