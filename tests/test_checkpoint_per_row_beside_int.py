"""A parameter server's per-row counts beside a count given as a Python int (``"step": 3``,
which a save takes as a count) are still checked at the save: 24352528 made a per-row key a
count only beside a 0-d integer *array*, so ``step_per_row`` holding -1 beside ``step=3`` was
written, to be refused only at the resume, as every such key was refused at the save before."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError, save_checkpoint
from distconv.parameter import Parameter

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    "key, counts",
    [("step_per_row", np.array([3, -1, 3])), ("step_runs_per_row", np.array([[0, 3], [2, -1]]))],
    ids=["per row", "runs"],
)
def test_per_row_counts_beside_a_python_int_count_are_checked(tmp_path, key, counts):
    path = tmp_path / "c.safetensors"
    entry = {"m": np.zeros(3), "v": np.zeros(3), "step": 3, key: counts}
    with pytest.raises(CheckpointError, match=rf"optimizer state w/{key}: holds -1, not a count"):
        save_checkpoint(path, [Parameter("w", np.ones(3))], {"w": entry})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("step", [True, 3.0], ids=["bool", "float"])
def test_beside_what_is_no_integer_count_a_per_row_float_buffer_is_saved(tmp_path, step):
    """A bool or a float is no count (as the save's own check says): an optimizer's float
    buffer ``v_per_row`` beside it stays a buffer (24352528's case)."""
    path = tmp_path / "c.safetensors"
    entry = {"m": np.zeros(3), "step": step, "step_per_row": np.array([0.5, 0.25, 1.0])}
    save_checkpoint(path, [Parameter("w", np.ones(3))], {"w": entry})
    assert path.is_file()
