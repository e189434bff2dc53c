"""Checkpoints of byte-swapped (big-endian) arrays save, load and restore in place; a restore
into two parameters of one name is refused, and one parameter listed twice is restored once."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import (
    CheckpointError,
    load_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from distconv.parameter import Parameter


def test_a_big_endian_parameter_saves_a_checkpoint_that_loads_and_restores(tmp_path):
    """A big-endian array (weights read from a ``>f8`` file) was written in safetensors'
    little-endian bytes but digested in its own: every such checkpoint failed its checksum,
    reported as corrupt, and a resume set each aside; nor would it restore into the same model
    (``model dtype >f8, checkpoint dtype float64``)."""
    values = np.array([[1.5, -2.25], [3.0, 1e-300]], dtype=">f8")
    moments = np.array([[0.5, 0.25], [0.125, 2.0]], dtype=">f8")
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", values.copy())], {"w": {"m": moments.copy()}}, step=3)

    ckpt = load_checkpoint(path)
    np.testing.assert_array_equal(ckpt.params["w"], values)
    np.testing.assert_array_equal(ckpt.optim_state["w"]["m"], moments)
    target = Parameter("w", np.zeros((2, 2), dtype=">f8"))
    state = {"w": {"m": np.zeros((2, 2), dtype=">f8")}}
    assert restore_checkpoint(path, [target], state).step == 3
    np.testing.assert_array_equal(target.value, values)
    np.testing.assert_array_equal(state["w"]["m"], moments)
    assert target.value.dtype == np.dtype(">f8")  # restored in place, in its own byte order


def test_restoring_into_two_parameters_of_one_name_is_refused_and_changes_nothing(tmp_path):
    """A save refuses two parameters of one name, but a restore checked only the last of them
    and copied the checkpoint's array into both: numpy spread a (1,) tensor over the other's
    (3,) values without a word."""
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.array([5.0]))])
    first = Parameter("w", np.array([1.0, 2.0, 3.0]))
    second = Parameter("w", np.array([4.0]))
    with pytest.raises(CheckpointError, match=r"2 parameters are named 'w'"):
        restore_checkpoint(path, [first, second])
    np.testing.assert_array_equal(first.value, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(second.value, [4.0])


def test_a_parameter_listed_twice_is_restored_once_as_setup_takes_it(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    save_checkpoint(path, [Parameter("w", np.array([5.0, 6.0]))])
    w = Parameter("w", np.zeros(2))
    restore_checkpoint(path, [w, w])
    np.testing.assert_array_equal(w.value, [5.0, 6.0])
