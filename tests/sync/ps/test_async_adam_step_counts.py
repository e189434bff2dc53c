"""Async Adam on the shards: each block's bias correction counts the updates applied to that
block.

Two workers push to two real async shards at different rates, one after the other in a known
order (so the shards apply them in that order), with Adam's state per block on the shards and
parameters cut into several blocks across both shards; rank 1 never pushes the first parameter,
so its step count is rank 0's pushes alone. The shards' values must equal an
independent numpy Adam that applies the same gradients in the same order, each parameter's
step count that of the pushes applied to it (none dropped here: within ``max_staleness``).
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, shard_values, small_net

LR, B1, B2, EPS = 0.01, 0.9, 0.999, 1e-8
#: who pushes, in order: rank 1 pushes three times for each of rank 0's at first, then rank 0
#: alone (its versions lag by up to 3 updates: under the default max_staleness of 4)
ORDER = [0, 1, 1, 1, 0, 1, 1, 0, 0, 0]


class NumpyAdam:
    """Adam (Kingma & Ba) written out, one step count per parameter."""

    def __init__(self, values: dict[str, np.ndarray]) -> None:
        self.values = {k: v.astype(np.float64) for k, v in values.items()}
        self.m = {k: np.zeros_like(v) for k, v in self.values.items()}
        self.v = {k: np.zeros_like(v) for k, v in self.values.items()}
        self.t = dict.fromkeys(values, 0)

    def step(self, name: str, grad: np.ndarray) -> None:
        self.t[name] += 1
        t = self.t[name]
        self.m[name] = B1 * self.m[name] + (1 - B1) * grad
        self.v[name] = B2 * self.v[name] + (1 - B2) * grad * grad
        m_hat = self.m[name] / (1 - B1**t)
        v_hat = self.v[name] / (1 - B2**t)
        self.values[name] -= LR * m_hat / (np.sqrt(v_hat) + EPS)


@pytest.mark.timeout(120)
def test_async_adam_on_the_shards_matches_numpy_adam_block_by_block(shards):
    endpoints = shards.start(2, workers=2, mode="async")
    nets = [small_net(seed=0), small_net(seed=0)]
    syncs = [insecure_worker(endpoints, r, 2, optimizer="adam", lr=LR) for r in range(2)]
    rng = np.random.default_rng(7)
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        reference = NumpyAdam({p.name: p.value for p in nets[0].parameters()})
        for rank in ORDER:
            sync, params, count = syncs[rank], nets[rank].parameters(), int(rng.integers(1, 9))
            sync.start_step(count)
            for p in params[rank:]:  # rank 1 leaves the first out: it lags in step count
                p.grad[...] = rng.standard_normal(p.shape) * 10.0 ** rng.integers(-3, 2)
                reference.step(p.name, p.grad / count)  # the worker pushes the sum of count
                sync.on_gradient(p)
            sync.finish_step()
        drops = [s.drops for s in syncs]
        held = shard_values(endpoints)
    finally:
        for sync in syncs:
            sync.close()
    assert drops == [0, 0], drops
    layout = syncs[0].layout  # a parameter's blocks on both shards: their counts kept apart
    assert any(len({layout.shard_of[b.id] for b in layout.blocks_of(i)}) == 2 for i in range(4))
    for name, value in held.items():
        np.testing.assert_allclose(value, reference.values[name], rtol=1e-10, err_msg=name)
