"""A checkpoint is refused when the optimizer state it writes holds NaN or infinity, not only
when the parameters do.

``StepCheckpoints.save`` checked the parameters' values alone. An update can overflow the
state while the values stay finite: in float32, Adam's ``v`` of a gradient of 1e22 is
``(1 - beta2) * g * g``, past float32's 3.4e38, so infinite, and the step ``m / sqrt(v)`` is 0.
That ``v`` was saved, and a resume trained on from it (every later step of that parameter 0).
Each sync whose optimizer state lives on the worker (LocalSync, MPISync) or on the shards
(PServerSync, sync and async: a real shard writing its own parts) is driven through the sync
contract: a good checkpoint at step 1, then a step whose gradient overflows one parameter's
``v``, then the checkpoint of step 2, which must be refused by name and write nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, small_net, train_steps

from distconv.optim import create_optimizer
from distconv.resume import Position, StepCheckpoints, TrainingError
from distconv.run_dir import RunDirectory
from distconv.sync.local import LocalSync
from distconv.sync.mpi.comm import SingleRankComm
from distconv.sync.mpi.sync import MPISync

#: a float32 gradient whose square, times Adam's 1 - beta2, is infinite; itself finite (a shard
#: refuses a non-finite gradient)
OVERFLOWING = 1e22


def _adam_sync(kind: str, shards, parts):
    """A one-worker sync of ``kind`` training with Adam (``ps-*``: on a shard of that mode that
    writes its parts in ``parts``)."""
    if kind == "local":
        return LocalSync(create_optimizer("adam", lr=0.01))
    if kind == "mpi":
        return MPISync(create_optimizer("adam", lr=0.01), comm=SingleRankComm())
    mode = kind.removeprefix("ps-")
    (endpoint,) = shards.start(1, 1, mode=mode, extra=["--checkpoint-dir", str(parts)])
    return insecure_worker([endpoint], optimizer="adam", lr=0.01)


def _step_with_gradient(params, sync, name: str, gradient: float) -> None:
    """One step through the contract: parameter ``name``'s gradient is ``gradient``, the
    others' 0."""
    sync.start_step(1)
    for p in params:
        p.grad[...] = gradient if p.name == name else 0
        sync.on_gradient(p)
    sync.finish_step()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kind", ["local", "mpi", "ps-sync", "ps-async"])
def test_an_overflowed_optimizer_state_is_not_checkpointed(kind, shards, tmp_path):
    parts = tmp_path / "parts"
    sync = _adam_sync(kind, shards, parts)
    net = small_net(dtype=np.float32)
    params = net.parameters()
    ckpts = StepCheckpoints(RunDirectory(tmp_path / "run"), params, sync, {"seed": 0})
    try:
        sync.setup(params)
        ckpts.open(False)
        train_steps(net, sync, batches(1, 8))
        ckpts.save(Position(0, 1, 1), {})  # finite: written
        target = params[-1].name
        _step_with_gradient(params, sync, target, OVERFLOWING)
        sync.refresh_parameters()
        assert all(np.isfinite(p.value).all() for p in params), "the values overflowed too"
        with pytest.raises(TrainingError) as refused:
            ckpts.save(Position(0, 2, 2), {})
        assert str(refused.value) == (
            f"optimizer state 'v' of parameter '{target}' holds NaN or infinity at step 2 "
            "(epoch 1); no checkpoint was written over the last finite one (an update "
            "overflowed it, as a gradient too large for the dtype does); lower the learning "
            "rate, train in a wider dtype, or check the data"
        )
        assert [m.step for m in ckpts.run.manifests()] == [1]
        assert not (ckpts.run.checkpoint_root / "step-00000002").exists()
        if kind.startswith("ps-"):
            assert sorted(p.name for p in parts.iterdir()) == ["pserver-shard0-step1.safetensors"]
    finally:
        ckpts.close()
        sync.close()
