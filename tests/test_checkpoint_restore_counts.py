"""restore_checkpoint checks a checkpoint's optimizer state as the syncs' load_state_dict does:
a step that is no count (-1 in a file whose digest holds: a save takes what it is given) was
copied into the sync's int64 ``step``, a bias correction of a step never taken."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.checkpoint import (
    DIGEST_KEY,
    OPTIM_PREFIX,
    CheckpointError,
    restore_checkpoint,
    save_checkpoint,
    save_tensors,
)
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync


def _adam(value: np.ndarray) -> tuple[list[Parameter], LocalSync]:
    params = [Parameter("w", value)]
    sync = LocalSync(create_optimizer("adam", lr=0.01))
    sync.setup(params)
    return params, sync


def _with_step(path, step: np.ndarray) -> None:
    """Checkpoint ``path`` written again with optimizer state ``w/step`` = ``step``, its digest
    intact: as a distconv before save_checkpoint refused such a step wrote it."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    with safe_open(str(path), "np") as f:
        metadata = {k: v for k, v in f.metadata().items() if k != DIGEST_KEY}
    save_tensors(path, {**load_file(path), f"{OPTIM_PREFIX}w/step": step}, metadata)


def test_a_step_that_is_no_count_is_refused_at_restore_and_nothing_changes(tmp_path):
    """(A count past int64's largest is refused already: its file's dtype is not int64.)"""
    params, sync = _adam(np.ones((2, 2)))
    path = tmp_path / "c.safetensors"
    save_checkpoint(path, params, sync.state)
    _with_step(path, np.array(-1, np.int64))
    params, sync = _adam(np.zeros((2, 2)))
    sync.state["w"]["step"][...] = 3
    with pytest.raises(CheckpointError, match=r"optimizer state w/step: holds -1, not a count"):
        restore_checkpoint(path, params, sync.state)
    assert sync.state["w"]["step"] == 3 and not params[0].value.any()


def test_a_whole_step_is_restored(tmp_path):
    params, sync = _adam(np.ones((2, 2)))
    sync.state["w"]["step"][...] = 5
    save_checkpoint(tmp_path / "c.safetensors", params, sync.state)
    params, sync = _adam(np.zeros((2, 2)))
    restore_checkpoint(tmp_path / "c.safetensors", params, sync.state)
    assert sync.state["w"]["step"] == 5 and (params[0].value == 1).all()
