"""PServerSync.setup takes its parameters through ``setup_params`` as the base setup does:
two parameters of one name are refused before any hello, naming the
name and both shapes, and a parameter listed twice is taken once."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter


@pytest.mark.timeout(60)
def test_two_parameters_of_one_name_are_refused_before_any_hello():
    sync = insecure_worker(["127.0.0.1:1"], timeout=2)  # nothing there: a hello would time out
    try:
        with pytest.raises(ValueError, match=r"two parameters are named 'w' \(\(3,\) and \(4,\)\)"):
            sync.setup([Parameter("w", np.zeros(3)), Parameter("w", np.zeros(4))], {})
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_a_parameter_listed_twice_is_taken_once(shards):
    (endpoint,) = shards.start(1, workers=1)
    a = Parameter("a", np.zeros(4))
    sync = insecure_worker([endpoint], lr=1.0)
    try:
        sync.setup([a, a])
        assert sync.params == [a]
        sync.start_step(1)
        a.grad[...] = 1.0
        sync.on_gradient(a)
        sync.finish_step()
        np.testing.assert_array_equal(a.value, -1.0)  # SGD, lr 1, one example: one update
    finally:
        sync.close()
