"""A rate changed between two fits with ``optimizer.set_base_lr`` (LocalSync): the next fit's
steps train at it times the schedule's factor, as a hand SGD step says, where a rate assigned
to ``optimizer.lr`` is undone by the next epoch's schedule, as the fit's start warns; a
checkpoint made after the change records it and resumes at it, and a resume on disk in the
same Trainer goes on at it as one in memory does; a rate out of range is refused, naming it.
Under MPI (one rank) a rate set in a step's forward is the optimizer's once that step is
done, or has failed, so the next fit's start finds none set by hand. A job check that finds the
ranks' rates differ (MPI's, the parameter server workers') names the way out."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from distconv.checkpoint_errors import CheckpointError
from distconv.data import split, synthetic
from distconv.equivalence import weights
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import OptimizerConfigError, create_optimizer
from distconv.rank_endings import different_jobs_in
from distconv.sync.description import first_difference
from distconv.sync.errors import job_refusal, refusal_text
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.sync.rate_agreement import SAME_NEW_RATE, SAME_RATE
from distconv.trainer import Trainer
from tests.lr_changes import DECAY, FIRST_FIT_STEPS, FIRST_LR, NEW_LR, lenet_trainer, lr_data

TRAIN, _ = split(synthetic(n=48, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
#: every example in one step: an epoch is one SGD step on the whole set's mean gradient
WHOLE = len(TRAIN)


def trainer(sync, out_dir=None, network=None) -> Trainer:
    set_seed(0)
    net = network or lenet((1, 8, 8), num_classes=4, channels=(2, 3), hidden=8)
    return Trainer(
        net, sync, WHOLE, out_dir=out_dir, progress=False, dtype="float64", lr_decay=DECAY
    )


def sgd(lr: float = FIRST_LR) -> LocalSync:
    return LocalSync(create_optimizer("sgd", lr=lr))


def mean_gradient(t: Trainer) -> dict[str, np.ndarray]:
    """The whole set's mean gradient at ``t``'s weights: one epoch of SGD at rate 1 on a copy."""
    before = weights(t.network)
    once = trainer(sgd(1.0), network=copy.deepcopy(t.network))
    once.fit(TRAIN, epochs=1)
    return {k: before[k] - v for k, v in weights(once.network).items()}


def test_a_rate_set_between_fits_is_the_next_fits_rate():
    t = trainer(sgd())
    t.fit(TRAIN, epochs=1)
    before, grad = weights(t.network), mean_gradient(t)
    t.sync.optimizer.set_base_lr(NEW_LR)
    t.fit(TRAIN, epochs=2, resume=True)  # epoch 1: factor DECAY
    assert t.sync.optimizer.lr == NEW_LR * DECAY
    assert t.sync.optimizer_config()["lr"] == NEW_LR
    for name, value in weights(t.network).items():
        hand = before[name] - NEW_LR * DECAY * grad[name]
        np.testing.assert_allclose(value, hand, rtol=1e-9, atol=1e-13, err_msg=name)


def test_a_rate_assigned_to_lr_is_undone_by_the_next_epochs_schedule_and_said(caplog):
    """What set_base_lr is for: the working rate is the schedule's to set; the fit's start
    says so, once, naming set_base_lr."""
    t = trainer(sgd())
    t.fit(TRAIN, epochs=1)
    t.sync.optimizer.lr = NEW_LR
    with caplog.at_level("WARNING", logger="distconv.trainer"):
        t.fit(TRAIN, epochs=3, resume=True)
    assert t.sync.optimizer.lr == FIRST_LR * DECAY**2
    said = [r.getMessage() for r in caplog.records if "assigned by hand" in r.getMessage()]
    assert len(said) == 1, caplog.text
    assert f"optimizer.lr is {NEW_LR!r}" in said[0] and "optimizer.set_base_lr(" in said[0]


def test_a_rate_set_in_a_steps_forward_under_mpi_is_none_set_by_hand(caplog):
    """MPI trains a step at the rate its check posted and keeps one set in its forward for
    the next step: set in a fit's last step, the optimizer holds it once that step is done,
    so the next fit's start finds no rate set by hand, and trains at it."""
    sync = MPISync(create_optimizer("momentum", lr=FIRST_LR), comm=SingleRankComm())
    try:
        t = lenet_trainer(sync)
        t.set_at, t.in_forward = FIRST_FIT_STEPS - 1, True
        t.fit(lr_data(), epochs=1)
        assert (sync.optimizer.lr, sync.optimizer.lr_set_by_hand()) == (NEW_LR, False)
        with caplog.at_level("WARNING", logger="distconv.trainer"):
            t.fit(lr_data(), epochs=2, resume=True)
    finally:
        sync.close()
    assert "assigned by hand" not in caplog.text
    assert sync.optimizer.lr == NEW_LR * DECAY


def test_a_checkpoint_after_the_change_resumes_at_the_new_rate(tmp_path):
    """A notebook's fit, the rate changed, a Trainer writing checkpoints on from there; a new
    process resumes its first epoch's checkpoint: set to the new rate, it trains as the run
    that went on; built at the old one, it is refused, naming the rate."""
    first = trainer(sgd())
    first.fit(TRAIN, epochs=1)
    first.sync.optimizer.set_base_lr(NEW_LR)
    going_on = copy.deepcopy(first)
    run = trainer(going_on.sync, tmp_path / "run", going_on.network)
    run.fit(TRAIN, epochs=1)
    whole = trainer(first.sync, network=first.network)
    whole.fit(TRAIN, epochs=2)  # uninterrupted: epoch 0 at NEW_LR, epoch 1 at NEW_LR * DECAY

    resumed = sgd()  # the checkpoint records the new rate: the old one is another run
    with pytest.raises(
        CheckpointError, match=rf"optimizer.lr: checkpoint {NEW_LR}, this run {FIRST_LR}"
    ):
        trainer(resumed, tmp_path / "run").fit(TRAIN, epochs=2, resume=True)
    resumed.optimizer.set_base_lr(NEW_LR)
    again = trainer(resumed, tmp_path / "run")
    again.fit(TRAIN, epochs=2, resume=True)
    assert resumed.optimizer.lr == NEW_LR * DECAY
    for name, value in weights(again.network).items():
        np.testing.assert_allclose(value, weights(whole.network)[name], rtol=1e-12, err_msg=name)


def test_a_resume_on_disk_after_the_change_goes_on_at_it_as_in_memory(tmp_path, caplog):
    """A Trainer with an output directory resumes its own checkpoint, written at the old rate,
    at the rate set since, warning of it, and trains as the same Trainer without one does."""
    on_disk, in_memory = trainer(sgd(), tmp_path / "run"), trainer(sgd())
    for t in (on_disk, in_memory):
        t.fit(TRAIN, epochs=1)
        t.sync.optimizer.set_base_lr(NEW_LR)
    with caplog.at_level("WARNING", logger="distconv.resume"):
        on_disk.fit(TRAIN, epochs=2, resume=True)
    in_memory.fit(TRAIN, epochs=2, resume=True)
    assert on_disk.pos.step == 2
    said = f"optimizer.set_base_lr since this checkpoint was written at {FIRST_LR}"
    assert [r.levelname for r in caplog.records if said in r.getMessage()] == ["WARNING"]
    for name, value in weights(on_disk.network).items():
        np.testing.assert_array_equal(value, weights(in_memory.network)[name], err_msg=name)


def test_a_rate_set_from_another_than_the_checkpoints_is_still_refused(tmp_path):
    """Only the rate the optimizer left is accepted: a checkpoint of a run at another rate is
    another run's, whatever rates this optimizer held."""
    trainer(sgd(), tmp_path / "run").fit(TRAIN, epochs=1)
    other = sgd(0.01)
    other.optimizer.set_base_lr(NEW_LR)
    with pytest.raises(CheckpointError, match=rf"optimizer.lr: checkpoint {FIRST_LR}, this run"):
        trainer(other, tmp_path / "run").fit(TRAIN, epochs=2, resume=True)


def test_set_base_lr_keeps_the_schedules_factor():
    opt = create_optimizer("adam", lr=1e-3)
    opt.scale_lr(0.25)
    opt.set_base_lr(0.02)
    assert (opt.base_lr, opt.lr, opt.config()["lr"]) == (0.02, 0.005, 0.02)
    opt.scale_lr(0.5)
    assert opt.lr == 0.01


@pytest.mark.parametrize("bad", [0, -0.1, math.nan, math.inf, True, "0.1", None])
def test_a_rate_out_of_range_is_refused_naming_it_and_nothing_changes(bad):
    opt = create_optimizer("sgd", lr=0.1)
    opt.scale_lr(0.5)
    with pytest.raises(
        OptimizerConfigError, match=r"lr must (satisfy 0.0 < lr|be a number \(0.0 < lr\)), got "
    ):
        opt.set_base_lr(bad)
    assert (opt.base_lr, opt.lr) == (0.1, 0.05)


def test_set_base_lr_on_an_optimizer_whose_init_skipped_the_bases():
    """A subclass's own ``__init__`` that sets the rates itself (or an optimizer unpickled from
    before the factor was kept): set_base_lr works as on any other, and records the rate left."""

    class OwnInit(type(create_optimizer("sgd", lr=FIRST_LR))):
        def __init__(self) -> None:  # the base's skipped on purpose
            self.base_lr = self.lr = FIRST_LR
            self.hyper = {}

    opt = OwnInit()
    opt.set_base_lr(NEW_LR)
    assert (opt.lr, list(opt.earlier_base_lrs), opt.lr_set_by_hand()) == (NEW_LR, [FIRST_LR], False)
    assert OwnInit.earlier_base_lrs == ()  # the class's default, not grown through the instance


class Failed(Exception):
    """A layer's error inside a step."""


@pytest.mark.parametrize("fails_in", ["forward", "finish_step"])
def test_a_factor_set_in_a_step_that_failed_under_mpi_is_none_set_by_hand(caplog, fails_in):
    """A schedule's set_lr_scale in the second step's forward, then that step fails: in its
    forward, or in its finish_step (a grad_hook's error, before any update). The next fit
    trains at the schedule's rate from its first epoch's start, with no word of a rate set by
    hand."""
    in_failing_step = False

    def hook(params, examples):
        if in_failing_step:
            raise Failed

    sync = MPISync(
        create_optimizer("momentum", lr=FIRST_LR),
        comm=SingleRankComm(),
        grad_hook=hook if fails_in == "finish_step" else None,
    )
    t = lenet_trainer(sync)
    forward = t._forward

    def failing(arrays, index):
        nonlocal in_failing_step
        if t.pos.step < 1:  # the first step trains, setting the layout
            return forward(arrays, index)
        sync.set_lr_scale(DECAY)
        if fails_in == "forward":
            raise Failed
        in_failing_step = True
        return forward(arrays, index)

    t._forward = failing
    try:
        with pytest.raises(Failed):
            t.fit(lr_data(), epochs=1)
        t._forward, in_failing_step = forward, False
        with caplog.at_level("WARNING", logger="distconv.trainer"):
            t.fit(lr_data(), epochs=1)
    finally:
        sync.close()
    assert "assigned by hand" not in caplog.text


@pytest.mark.parametrize("check", ["mpi", "pserver workers"])
def test_a_job_check_that_finds_the_rates_differ_names_the_way_out(check):
    """MPI's job check and the parameter server workers' say one line where the ranks' rates
    differ: both rates, then the ways out, a first fit's (optimizers made at two rates) and a
    later one's (a rate set on some ranks only); the launcher reads it back whole as the
    ranks' different jobs (no restart)."""
    ours, theirs = ({"optimizer": {"name": "sgd", "lr": lr}} for lr in (NEW_LR, FIRST_LR))
    diff = first_difference(ours, theirs)
    said = (
        refusal_text(0, 1, ours, theirs, diff)
        if check == "mpi"
        else str(job_refusal(0, 1, ours, theirs, diff))
    )
    assert said == (
        f"rank 0 and rank 1 run different jobs: optimizer.lr: {NEW_LR} here, {FIRST_LR} there: "
        f"{SAME_RATE}"
    )
    assert SAME_RATE.endswith(SAME_NEW_RATE)  # and a first fit's cause: made at two rates
    assert "every rank's optimizer is made at the same lr" in said
    assert different_jobs_in([f"rank 0: {said}"]) == said
    other = {"optimizer": {"name": "momentum", "lr": FIRST_LR}}  # not the rate: no such words
    assert SAME_NEW_RATE not in refusal_text(0, 1, ours, other, first_difference(ours, other))
