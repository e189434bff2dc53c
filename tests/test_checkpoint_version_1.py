"""A distconv before step checkpoints (until 11-30) wrote one ``checkpoint.safetensors`` of
format version 1, whose digest covers its tensors alone; it was refused outright, and the
advice given (``--overwrite``) deleted the only copy of those weights. Its
weights now load, checked by that digest; no run resumes from it.

``data/distconv-0.1-checkpoint.safetensors`` was written by that distconv itself (commit
5029f8c6, ``distconv.checkpoint.save_checkpoint``) from the values :data:`WEIGHTS` and
:data:`STATE` hold, at step 3, epoch 1, seed 7."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import (
    CheckpointDamaged,
    CheckpointVersionError,
    load_checkpoint,
    restore_checkpoint,
)
from distconv.parameter import Parameter

FILE = Path(__file__).parent / "data" / "distconv-0.1-checkpoint.safetensors"
WEIGHTS = {
    "fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
    "fc.bias": np.array([0.5, -1.25], np.float32),
}
STATE = {
    "fc.weight": {"m": np.full((2, 3), 0.125, np.float32), "step": np.array(3)},
    "fc.bias": {"m": np.array([1.0, 2.0], np.float32), "step": np.array(3)},
}


def _model() -> list[Parameter]:
    return [Parameter(name, np.zeros_like(value)) for name, value in WEIGHTS.items()]


def test_a_version_1_files_weights_load_into_a_model():
    params = _model()
    ckpt = restore_checkpoint(FILE, params)
    for p in params:
        assert np.array_equal(p.value, WEIGHTS[p.name]) and p.value.dtype == np.float32
    assert (ckpt.step, ckpt.epoch, ckpt.seed) == (3, 1, 7)  # as the file holds them
    assert ckpt.optimizer == {"name": "adam", "lr": 0.01} and ckpt.extra == {"data": "synthetic"}
    read = load_checkpoint(FILE, position=False)
    assert read.optim_state.keys() == STATE.keys()
    for name, entry in STATE.items():
        for key, value in entry.items():
            assert np.array_equal(read.optim_state[name][key], value)


def test_no_run_goes_on_from_a_version_1_file():
    """Its step, epoch and optimizer state are covered by no digest: a resume, or a restore of
    the optimizer state, is refused, saying how to load the weights."""
    said = r"version '1' file, whose checksum covers its tensors alone; its weights load into "
    said += r"a model with distconv\.checkpoint\.restore_checkpoint\(path, params\)"
    with pytest.raises(CheckpointVersionError, match=said):
        load_checkpoint(FILE)
    params = _model()
    state = {name: {k: np.zeros_like(v) for k, v in entry.items()} for name, entry in STATE.items()}
    with pytest.raises(CheckpointVersionError, match=said):
        restore_checkpoint(FILE, params, state)
    assert all(not p.value.any() for p in params)


def test_a_version_1_file_whose_tensors_changed_fails_its_checksum(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    shutil.copyfile(FILE, path)
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1  # a bit of the last tensor's data
    path.write_bytes(bytes(raw))
    params = _model()
    with pytest.raises(CheckpointDamaged, match="is corrupt: it fails its checksum"):
        restore_checkpoint(path, params)
    assert all(not p.value.any() for p in params)
