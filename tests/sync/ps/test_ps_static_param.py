"""A static parameter given to the parameter-server sync (the Trainer gives only trainable
ones; a caller of the sync API may give all of a network's): rank 0 seeds it, the other
ranks pull it, and no step pushes it. Every ``finish_step`` raised on it ("'NoneType' object
does not support item assignment", clearing its gradient, which a static one has not), so
such a job failed at its first step. Real shards, two workers in threads."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks

from distconv.parameter import Parameter


@pytest.mark.timeout(120)
def test_a_static_parameter_is_seeded_pulled_and_left_alone(shards):
    endpoints = shards.start(2, workers=2)

    def body(rank: int):
        w = Parameter("w", np.full(6, float(rank)))
        table = Parameter("table", np.arange(5.0) * (10 if rank == 0 else 1), static=True)
        sync = insecure_worker(endpoints, rank=rank, world=2, timeout=20)
        try:
            sync.setup([w, table], {})
            for _ in range(2):
                sync.start_step(1)
                w.grad[...] = 1.0
                sync.on_gradient(w)
                sync.finish_step()
            return w.value.copy(), table.value.copy()
        finally:
            sync.close()

    (w0, t0), (w1, t1) = run_ranks(body, 2)
    np.testing.assert_array_equal(t0, np.arange(5.0) * 10)  # rank 0's, on both ranks
    np.testing.assert_array_equal(t1, np.arange(5.0) * 10)
    np.testing.assert_allclose(w0, w1)
    np.testing.assert_allclose(w0, -2 * 0.05)  # rank 0's zeros, two steps of mean gradient 1
