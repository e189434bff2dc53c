"""Review k270: checkpoints of byte-swapped arrays, parameters sharing a name, a real full disk."""

from __future__ import annotations

import numpy as np

from distconv.checkpoint import (
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
