"""Review k276: optimizer state with a value that is no numbers (``{"w": {"step": None}}``),
given to save_checkpoint, was safetensors' bare 'Unknown dtype "object"', naming neither the
entry nor the file (2ce8301 named entries that are no mapping, not values), and the same in the
state a restore fills was a bare AttributeError ('NoneType' object has no attribute 'shape').
Both are now named as the sync's load_state_dict names them (66055db)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import (
    load_checkpoint,
    save_checkpoint,
)
from distconv.parameter import Parameter
from tests.test_k272_checkpoint_state import refused_restore, refused_save

pytestmark = pytest.mark.timeout(60)

CASES = [
    ({"w": {"step": None}}, "optimizer state w/step: a NoneType given, not an array of numbers"),
    ({"w": {"m": "ab"}}, "optimizer state w/m: a str given, not an array of numbers"),
]


@pytest.mark.parametrize("state,said", CASES)
def test_a_save_of_a_value_that_is_no_numbers_is_refused_naming_it(tmp_path, state, said):
    path, refused = refused_save(tmp_path, state)
    assert f"cannot save checkpoint {path}: {said}" == refused


@pytest.mark.parametrize("state,said", CASES)
def test_a_restore_into_a_value_that_is_no_numbers_is_refused_and_copies_nothing(
    tmp_path, state, said
):
    path, refused = refused_restore(tmp_path, state)
    assert f"checkpoint {path} does not fit the model: {said}" in refused


def test_numbers_that_are_no_array_still_save(tmp_path):
    """A list or a Python number is numbers (the sync takes them too): saved as before."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": [1.0, 2.0], "step": 3}})
    state = load_checkpoint(path).optim_state["w"]
    assert state["m"].tolist() == [1.0, 2.0] and int(state["step"]) == 3
