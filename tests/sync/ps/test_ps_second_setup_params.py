"""A second ``setup`` with another set of parameters (a ``fit`` after a layer was frozen or
unfrozen, against shards started afresh, which take the new job) indexes them anew:
the worker kept the name -> index map of its first setup, so a gradient went to the
parameter at its old index, or failed with ``no parameter 'a' in this job`` for one the job
holds."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter


def _step(sync, grads) -> None:
    sync.start_step(1)
    for p, g in grads:
        p.grad[...] = g
        sync.on_gradient(p)
    sync.finish_step()


@pytest.mark.timeout(60)
def test_a_second_setup_with_other_parameters_pushes_each_gradient_to_its_own(shards):
    (endpoint,) = shards.start(1, workers=1)
    a, b = Parameter("a", np.zeros(4)), Parameter("b", np.zeros(4))
    sync = insecure_worker([endpoint], lr=1.0)
    try:
        sync.setup([b])  # the first fit: a frozen
        _step(sync, [(b, 1.0)])
        shards.stop()  # the job's shards start afresh, on the same port, for the next fit
        shards.start(1, workers=1, extra=["--bind", endpoint])
        sync.setup([a, b])  # a trains again
        _step(sync, [(a, 1.0), (b, 2.0)])  # SGD, lr 1, one example
        np.testing.assert_array_equal(a.value, -1.0)
        np.testing.assert_array_equal(b.value, -3.0)
    finally:
        sync.close()
