"""An async worker's refresh after other ranks' steps, with none of its own.

A refresh skips its pull once this worker pulled every block since its last step (the chief's
checkpoint right after the epoch's refresh). Its own steps are not all that moves the shards:
another rank's are too. A script driving the sync itself (``barrier()``, then
``refresh_parameters()`` on every rank, as ``docs/architecture.md`` says) has a rank that pulled
at setup, or at a refresh before, and took no step since (it ran out of data first) while the
others trained: its refresh kept the values of its last pull. Real shard processes.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, run_ranks, shard_values, small_net, train_steps


@pytest.mark.timeout(90)
def test_a_refresh_brings_the_other_ranks_steps_taken_since_this_ranks_pull(shards):
    """Rank 1 pulls at setup, then only rank 0 steps; later both refresh, then only rank 1
    steps and rank 0 refreshes again, with no step of its own since its refresh."""
    (endpoint,) = shards.start(1, workers=2, mode="async")
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2, lr=0.1) for r in range(2)]
    held: list[dict[str, dict[str, np.ndarray]]] = [{}, {}]

    def rank(r: int) -> None:
        sync, net = syncs[r], nets[r]
        sync.setup(net.parameters())
        for stepper in (0, 1):  # one rank steps, the other holds its last pull
            if r == stepper:
                train_steps(net, sync, batches(1, 8, seed=stepper), r, 2)
            sync.barrier()
            sync.refresh_parameters()
            values = {p.name: p.value.copy() for p in net.parameters()}
            held[r][f"after rank {stepper}'s step"] = values
            sync.barrier()  # no step before every rank's refresh is in

    try:
        run_ranks(rank, 2)
        trained = shard_values([endpoint])
    finally:
        for s in syncs:
            s.close()
    for r in range(2):
        for name, value in trained.items():
            np.testing.assert_array_equal(held[r]["after rank 1's step"][name], value, name)
    for name in trained:  # after rank 0's step, the values both ranks refreshed to are one
        first = [held[r]["after rank 0's step"][name] for r in range(2)]
        np.testing.assert_array_equal(first[1], first[0], f"rank 1's {name}")
