"""Review k272: optimizer state whose entries are no mappings (``{"w": array}``), or which is no
mapping at all, given to save_checkpoint or restore_checkpoint: a bare AttributeError
(``'numpy.ndarray' object has no attribute 'items'``), now refused naming the entry as the
sync's ``load_state_dict`` names it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.parameter import Parameter

pytestmark = pytest.mark.timeout(60)


def refused_save(tmp_path: Path, state: object) -> tuple[Path, str]:
    """A save of ``state`` over a checkpoint of step 1, refused: its path and the error. The
    checkpoint before it stays."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": np.ones(2)}}, step=1)
    with pytest.raises(CheckpointError) as refused:
        save_checkpoint(path, [Parameter("w", np.zeros(2))], state, step=2)
    assert load_checkpoint(path).step == 1  # the one before it stays
    return path, str(refused.value)


def refused_restore(tmp_path: Path, state: object) -> tuple[Path, str]:
    """A restore of a checkpoint into ``state``, refused: its path and the error. Nothing was
    copied into the weight."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": np.ones(2)}})
    w = Parameter("w", np.zeros(2))
    with pytest.raises(CheckpointError) as refused:
        restore_checkpoint(path, [w], state)
    np.testing.assert_array_equal(w.value, [0.0, 0.0])  # checked before anything is copied
    return path, str(refused.value)


CASES = [
    ({"w": np.zeros(2)}, "optimizer state for 'w' is a ndarray, not a mapping of state keys"),
    ({"w": None}, "optimizer state for 'w' is a NoneType, not a mapping of state keys"),
    ([("w", {"m": np.zeros(2)})], "optimizer state is a list, not a mapping of parameter names"),
]


@pytest.mark.parametrize("state,said", CASES)
def test_a_save_of_state_that_is_no_mapping_is_refused_naming_it(tmp_path, state, said):
    path, refused = refused_save(tmp_path, state)
    assert f"cannot save checkpoint {path}: {said}" in refused
    assert "(it has [])" not in refused  # no keys to tell of: none are said


@pytest.mark.parametrize("state,said", CASES)
def test_a_restore_into_state_that_is_no_mapping_is_refused_and_copies_nothing(
    tmp_path, state, said
):
    path, refused = refused_restore(tmp_path, state)
    assert f"checkpoint {path} does not fit the model: {said}" in refused


def test_a_restore_names_the_state_keys_the_checkpoint_has_for_the_entry(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": np.ones(2)}})
    with pytest.raises(CheckpointError, match=r"arrays \(it has \['m'\]\)$"):
        restore_checkpoint(path, [Parameter("w", np.zeros(2))], {"w": np.zeros(2)})


def test_well_formed_state_still_saves_and_restores(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {"m": np.full(2, 3.0)}})
    state = {"w": {"m": np.zeros(2)}}
    restore_checkpoint(path, [Parameter("w", np.zeros(2))], state)
    np.testing.assert_array_equal(state["w"]["m"], [3.0, 3.0])


def test_a_restore_into_state_with_a_key_that_is_no_string_is_refused_and_copies_nothing(
    tmp_path,
):
    """A save writes key 1 as ``optim/w/1``, read back as "1"; the fit check compared the two by
    their text, passed, and the copy then raised a bare ``KeyError: 1`` after the weights were
    already restored."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.ones(2))], {"w": {1: np.ones(2)}})
    w, state = Parameter("w", np.zeros(2)), {"w": {1: np.zeros(2)}}
    with pytest.raises(CheckpointError) as refused:
        restore_checkpoint(path, [w], state)
    said = "optimizer state 'w' has no state 1 (state keys are strings: it has ['1'])"
    assert said in str(refused.value)
    np.testing.assert_array_equal(w.value, [0.0, 0.0])
    np.testing.assert_array_equal(state["w"][1], [0.0, 0.0])
