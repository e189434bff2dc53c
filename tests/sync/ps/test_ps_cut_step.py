"""A step cut short in its last pass (a second Ctrl-C, an error in a layer's backward) after
some gradients fired: a resume of the same trainer on the same PServerSync sent the cut
step's queued gradients again beside its own ("parameters [0, 0, 1, 1, ...] are none or
repeat"), or pushes already sent and applied for a step the resume runs again ("stale
push"), instead of the weights of an uninterrupted run. Real shards."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.data import split, synthetic
from distconv.init import set_seed
from distconv.models import lenet
from distconv.trainer import Trainer

TRAIN, _ = split(synthetic(n=96, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)


def _trainer(sync, out_dir, **kw) -> Trainer:
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    return Trainer(net, sync, 8, out_dir=out_dir, progress=False, dtype="float64", **kw)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("push_bytes", [None, 0])
def test_a_resume_after_a_step_cut_short_trains_as_an_uninterrupted_run(
    shards, tmp_path, push_bytes
):
    """push_bytes None: the cut step's gradients wait in the queue; 0: most are sent while
    the step runs (when the link is free: timing decides which)."""
    sync = insecure_worker(shards.start(1, workers=1), optimizer="sgd", lr=0.05)
    whole = _trainer(sync, tmp_path / "whole", accumulate=2)
    try:
        whole.fit(TRAIN, epochs=1)
    finally:
        sync.close()
    sync = insecure_worker(
        shards.start(1, workers=1), optimizer="sgd", lr=0.05, push_bytes=push_bytes
    )
    t = _trainer(sync, tmp_path / "cut", accumulate=2, checkpoint_every=1)
    backward, calls = t.network.backward, []

    def cut_in_step_3_pass_2(*args, **kwargs):
        calls.append(args)
        backward(*args, **kwargs)  # every gradient fired: queued or sent
        if len(calls) == 6:
            raise KeyboardInterrupt  # before finish_step

    t.network.backward = cut_in_step_3_pass_2
    try:
        with pytest.raises(KeyboardInterrupt):
            t.fit(TRAIN, epochs=1)
        assert t.checkpoints.run.latest().step == 2
        t.network.backward = backward
        t.fit(TRAIN, epochs=1, resume=True)
    finally:
        sync.close()
    for p, q in zip(whole.params, t.params):
        np.testing.assert_allclose(q.value, p.value, rtol=1e-12, err_msg=p.name)
