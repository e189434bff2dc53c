"""Review k270: StepCheckpoints.restore of a checkpoint that save_checkpoint wrote."""

from __future__ import annotations

import numpy as np

from distconv.checkpoint import save_checkpoint
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.resume import StepCheckpoints
from distconv.sync import create_sync


def test_a_checkpoint_saved_through_the_api_restores_at_its_step_with_no_sums(tmp_path):
    """``save_checkpoint`` records no epoch sums: restoring its file failed with a bare
    ``KeyError: 'sums'`` after the weights were already copied in."""
    path = tmp_path / "api.safetensors"
    save_checkpoint(path, [Parameter("w", np.array([1.5, -2.0]))], step=3, epoch=1)
    params = [Parameter("w", np.zeros(2))]
    sync = create_sync("local", optimizer=create_optimizer("sgd"))
    sync.setup(params)
    state, pos = StepCheckpoints(None, params, sync, {}).restore(path)
    assert (pos.epoch, pos.step, pos.step_in_epoch, pos.sums) == (1, 3, 0, {})
    assert state == {}
    np.testing.assert_array_equal(params[0].value, [1.5, -2.0])
