"""A parameter frozen when a checkpoint was written and trained after the resume has no
optimizer state in the checkpoint: it starts from fresh state, as with the other syncs. The
parameter-server sync refused the resume instead ("optimizer state to restore lacks 'm'").
Real shard; the same resume with LocalSync is the reference (float64)."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.data import split, synthetic
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer

TRAIN, _ = split(synthetic(n=96, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
FROZEN = "conv1.weight"


def _net():
    set_seed(0)
    return lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)


def _trainer(sync, out_dir, frozen: bool) -> Trainer:
    net = _net()
    if frozen:
        net["conv1"].weight.set_static()
    return Trainer(net, sync, 16, out_dir=out_dir, progress=False, dtype="float64")


def _frozen_then_resumed(make_sync, out_dir) -> dict[str, np.ndarray]:
    """One epoch with conv1.weight frozen, then a resume that trains it for a second."""
    for frozen, epochs, resume in ((True, 1, False), (False, 2, True)):
        sync = make_sync()
        trainer = _trainer(sync, out_dir, frozen)
        try:
            trainer.fit(TRAIN, epochs=epochs, resume=resume)
        finally:
            sync.close()
    return {p.name: p.value.copy() for p in trainer.network.parameters()}


@pytest.mark.timeout(120)
def test_a_parameter_unfrozen_since_the_checkpoint_starts_from_fresh_state(shards, tmp_path):
    served = _frozen_then_resumed(  # fresh shards for the resume: the model changed
        lambda: insecure_worker(shards.start(1, workers=1), optimizer="adam", lr=0.01),
        tmp_path / "ps",
    )
    local = _frozen_then_resumed(
        lambda: LocalSync(create_optimizer("adam", lr=0.01)), tmp_path / "local"
    )
    assert not np.allclose(served[FROZEN], _net()["conv1"].weight.value)  # it trained, at last
    for name, value in local.items():
        np.testing.assert_allclose(served[name], value, rtol=1e-10, atol=1e-12, err_msg=name)
