"""A step cut short (an error or a second Ctrl-C after a sparse table's push) leaves the rows
it pushed recorded under the table's index; a second ``setup`` with another set of parameters
(a ``fit`` after a layer was frozen or unfrozen, which indexes them anew) kept them, so the
parameter now at that index had its gradient cleared in those rows alone after its next step,
and the rest was carried into the step after."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter


@pytest.mark.timeout(60)
def test_a_step_cut_short_leaves_no_rows_to_the_next_setups_parameters(shards):
    (endpoint,) = shards.start(1, workers=1)
    table = Parameter("t", np.zeros((8, 2)), sparse_rows=True)
    dense = Parameter("w", np.zeros((8, 2)))
    sync = insecure_worker([endpoint], lr=1.0)
    try:
        sync.setup([table])  # the first fit: w frozen
        sync.start_step(1)
        sync.prefetch({"t": [5, 6]})
        table.grad[5:7] = 1.0
        sync.on_gradient(table)  # then the step is cut short: no finish_step
        table.grad[...] = 0  # as Trainer.fit does (network.zero_grad) before the next setup
        shards.stop()  # the job's shards start afresh, on the same port, for the next fit
        shards.start(1, workers=1, extra=["--bind", endpoint])
        sync.setup([dense, table])  # w trains again, at index 0, the table's index before
        sync.start_step(1)
        dense.grad[...] = 1.0
        sync.on_gradient(dense)
        sync.prefetch({"t": [0]})
        table.grad[0] = 1.0
        sync.on_gradient(table)
        sync.finish_step()
        np.testing.assert_array_equal(dense.value, -1.0)
        # finish_step's contract: every gradient is zero again, w's in all its rows
        np.testing.assert_array_equal(dense.grad, 0.0)
        np.testing.assert_array_equal(table.grad, 0.0)
        sync.start_step(1)
        dense.grad += 1.0  # as a layer's backward adds its gradient
        sync.on_gradient(dense)
        sync.finish_step()
        np.testing.assert_array_equal(dense.value, -2.0)  # not -3: no step's gradient twice
    finally:
        sync.close()
