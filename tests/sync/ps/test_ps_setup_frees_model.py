"""PServerSync's setup is its own (it does not call the base's): it must let go of what the
base's lets go of, check_gradient's cache of the last setup's parameters included."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter
from tests.sync.freed_model import freed_by_next_setup


@pytest.mark.timeout(60)
def test_a_setup_lets_go_of_the_last_model_s_parameters(shards):
    """The cache held the last model's parameter list until the next model's first gradient:
    a sweep on one worker kept each dropped model alive through its next setup."""
    (endpoint,) = shards.start(1, workers=1)
    sync = insecure_worker([endpoint], lr=1.0)
    try:
        # another model's next, of the job's layout
        second = Parameter("a", np.zeros(3))
        assert freed_by_next_setup(sync, lambda: Parameter("a", np.zeros(3)), second)
    finally:
        sync.close()
