"""A rate changed with ``optimizer.set_base_lr`` on a parameter server (real shards on
127.0.0.1, a ``PServerSync`` worker and the Trainer): the shards apply each push at the rate
it carries, so a rate set inside a fit is what its next steps train at, as one process
trains; a checkpoint made after it records the new rate, and a run resumed from it on fresh
shards trains on at that rate where it is set so, and is refused, naming the rate, where not.

Between two fits on the same shards the rate is refused instead: a shard holds the job of its
first hello, optimizer rate included, and refuses a later hello of another description."""

from __future__ import annotations

import pytest
from ps_helpers import insecure_worker

from distconv.checkpoint_errors import CheckpointError
from distconv.equivalence import mismatch, weights
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.sync.peers import JobRefused
from tests.lr_changes import (
    DECAY,
    FIRST_FIT_STEPS,
    FIRST_LR,
    NEW_LR,
    data,
    fit_twice,
    lenet_trainer,
)

pytestmark = pytest.mark.timeout(120)


def worker(shards):
    """One worker of a job of one, on one fresh shard, at :data:`FIRST_LR`."""
    return insecure_worker(shards.start(1, workers=1), optimizer="momentum", lr=FIRST_LR)


def local(sets: str):
    """The one-process reference of :func:`fit_twice`."""
    return weights(fit_twice(LocalSync(create_optimizer("momentum", lr=FIRST_LR)), sets).network)


def test_a_rate_set_inside_a_fit_is_what_the_shards_apply(shards):
    sync = worker(shards)
    try:
        trained = weights(fit_twice(sync, "in_fit").network)
    finally:
        sync.close()
    assert sync.optimizer.lr == NEW_LR * DECAY
    assert mismatch(local("in_fit"), local("no")) is not None
    assert (wrong := mismatch(local("in_fit"), trained)) is None, wrong


@pytest.mark.xfail(
    raises=JobRefused,
    strict=True,
    reason="a shard refuses a later hello whose optimizer.lr is not its first hello's",
)
def test_a_rate_set_between_fits_is_what_the_shards_apply(shards):
    sync = worker(shards)
    try:
        trained = weights(fit_twice(sync, "between").network)
    finally:
        sync.close()
    assert (wrong := mismatch(local("between"), trained)) is None, wrong


def test_a_checkpoint_after_the_change_resumes_at_the_new_rate(shards, tmp_path):
    """Three epochs in one fit, the rate set before the second epoch's second step,
    checkpoints at each epoch's end; the second epoch's is the newest once the third's is
    moved away: the third epoch resumed from it trains as the run that went on did."""
    out = tmp_path / "run"
    sync = worker(shards)
    try:
        run = lenet_trainer(sync, out)
        run.set_at = FIRST_FIT_STEPS + 1
        run.fit(data(), epochs=3)
        going_on = weights(run.network)
    finally:
        sync.close()
    (out / "checkpoints" / f"step-{3 * FIRST_FIT_STEPS:08d}").rename(tmp_path / "third")

    sync = worker(shards)  # fresh shards: the checkpoint's optimizer state from the chief
    try:
        with pytest.raises(CheckpointError, match=rf"optimizer.lr: checkpoint {NEW_LR}, "):
            lenet_trainer(sync, out).fit(data(), epochs=3, resume=True)
        sync.optimizer.set_base_lr(NEW_LR)
        resumed = lenet_trainer(sync, out)
        resumed.fit(data(), epochs=3, resume=True)
    finally:
        sync.close()
    assert resumed.pos.step == 3 * FIRST_FIT_STEPS
    assert (wrong := mismatch(going_on, weights(resumed.network))) is None, wrong
