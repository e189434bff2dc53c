"""Optimizer state to restore whose entries are no mappings (``{"w": array}``, ``{"w": None}``,
a state key that is no string), or which is no mapping at all, is refused by ``LocalSync`` and
``PServerSync`` with the ``load_state_dict`` error that names it, as a moment of another shape
is: it was a bare AttributeError (``'numpy.ndarray' object has no attribute 'items'``)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync


def _load(sync, state):
    w = Parameter("w", np.ones((2, 3)))
    try:
        sync.setup([w], None)
        before = {k: np.array(v) for k, v in sync.state_dict()["w"].items()}
        with pytest.raises(ValueError) as refused:
            sync.load_state_dict(state)
        after = sync.state_dict()["w"]
        for key, value in before.items():  # nothing copied
            np.testing.assert_array_equal(after[key], value, err_msg=key)
        return str(refused.value)
    finally:
        sync.close()


CASES = [
    ({"w": np.zeros((2, 3))}, "state for 'w' is a ndarray, not a mapping of state keys"),
    ({"w": None}, "state for 'w' is a NoneType, not a mapping of state keys"),
    (
        {"w": {0: np.zeros((2, 3))}},
        "'w' has no state 0 (state keys are strings: it has ['velocity'])",
    ),
    ([("w", {"velocity": np.zeros((2, 3))})], "state is a list, not a mapping of parameter"),
]


@pytest.mark.parametrize("state, why", CASES)
def test_an_entry_that_is_no_mapping_is_refused_with_its_name_locally(state, why):
    said = _load(LocalSync(create_optimizer("momentum", lr=0.1)), state)
    assert said.startswith("LocalSync.load_state_dict: ")
    assert why in said


@pytest.mark.timeout(120)
@pytest.mark.parametrize("state, why", CASES)
def test_an_entry_that_is_no_mapping_is_refused_with_its_name_on_the_shards(shards, state, why):
    sync = insecure_worker(shards.start(1, workers=1), optimizer="momentum", lr=0.1)
    said = _load(sync, state)
    assert re.match(r"PServerSync\.load_state_dict: ", said)
    assert why in said
