"""PServerSync's setup is its own (it does not call the base's): it must let go of what the
base's lets go of, check_gradient's cache of the last setup's parameters included."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter


@pytest.mark.timeout(60)
def test_a_setup_lets_go_of_the_last_model_s_parameters(shards):
    """The cache held the last model's parameter list until the next model's first gradient:
    a sweep on one worker kept each dropped model alive through its next setup."""
    (endpoint,) = shards.start(1, workers=1)
    sync = insecure_worker([endpoint], lr=1.0)
    try:
        a = Parameter("a", np.zeros(3))
        sync.setup([a])
        sync.start_step(1)
        a.grad[...] = 1.0
        sync.on_gradient(a)
        sync.finish_step()
        dropped = weakref.ref(a)
        del a
        sync.setup([Parameter("a", np.zeros(3))])  # another model's, of the job's layout
        gc.collect()
        assert dropped() is None
    finally:
        sync.close()
