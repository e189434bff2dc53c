"""The base's record of the step (``check_gradient``), as strategies built on it use it: what
it keeps alive, and a subclass's gradients handed in by its own ``finish_step``."""

from __future__ import annotations

import gc
import weakref

import numpy as np

from distconv.parameter import Parameter
from tests.sync.test_custom_strategy_step_order import Checked


def test_a_setup_lets_go_of_the_last_model_s_parameters():
    """check_gradient's cache of the parameters it knows held the last setup's list, and so
    every parameter of a model dropped from the sync, until the next model's first gradient."""
    sync, w = Checked(), Parameter("w", np.ones(3))
    sync.setup([w])
    sync.start_step(1)
    w.grad[...] = 1.0
    sync.on_gradient(w)
    sync.finish_step()
    dropped = weakref.ref(w)
    del w
    sync.setup([Parameter("v", np.ones(2))])
    gc.collect()
    assert dropped() is None
