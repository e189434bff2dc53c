"""Without an output directory, a second fit goes on from the Trainer's position in memory
(``resume=True`` or ``"auto"``) exactly as one with a directory goes on from its checkpoint,
and one with ``resume=False`` says once that it starts the epochs again from trained weights;
a stop notes what it saved and how to go on."""

from __future__ import annotations

import logging
import signal

import numpy as np
import pytest

from distconv.notes import notes_of
from distconv.optim import create_optimizer
from distconv.resume import CheckpointError, Preempted
from distconv.step_guard import ParamLayout
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.trainer import Trainer
from tests.mpi.common import small_lenet, trainer_data
from tests.sigint_fixture import python_handles_sigint  # noqa: F401 (autouse)
from tests.signals import signal_at

FRESH_AGAIN = "fit(resume=False) starts from epoch 1 again, with the weights and optimizer state"


def _assert_way_on(stopped: BaseException, caplog: pytest.LogCaptureFixture, way_on: str) -> None:
    """A stop's way on is a note under its line (the line alone said neither what was saved
    nor how to go on), on every Python, and not logged as it stops."""
    assert notes_of(stopped) == [way_on]
    logged = [r.getMessage() for r in caplog.records if r.getMessage() == way_on]
    assert logged == [], caplog.text


def _trainer(out_dir=None, sync=LocalSync):
    """Adam, a halving lr per epoch, float64, dropout-free: 5 steps of 8 an epoch."""
    sync = sync(create_optimizer("adam", lr=0.01))
    return Trainer(small_lenet(seed=3), sync, 8, lr_decay=0.5, out_dir=out_dir, progress=False)


def _one_rank_mpi(optimizer):
    return MPISync(optimizer, comm=SingleRankComm())


def _weights(t):
    return {p.name: p.value.copy() for p in t.params}


def _assert_same(a, b):
    for name in a:
        assert np.max(np.abs(a[name] - b[name])) == 0.0, name


@pytest.mark.parametrize("resume", [True, "auto"])
def test_fit_1_then_fit_2_resumed_in_memory_ends_as_one_fit_2(resume, caplog):
    whole = _trainer()
    whole.fit(trainer_data(), trainer_data(), epochs=2)
    t = _trainer()
    t.fit(trainer_data(), trainer_data(), epochs=1)
    with caplog.at_level(logging.WARNING):
        history = t.fit(trainer_data(), trainer_data(), epochs=2, resume=resume)
    assert [r["epoch"] for r in history] == [2]  # numbered on, one more epoch
    assert history[0]["train_loss"] == whole.history[1]["train_loss"]
    assert (t.pos.epoch, t.pos.step) == (whole.pos.epoch, whole.pos.step) == (2, 10)
    _assert_same(_weights(t), _weights(whole))
    assert t.sync.state["fc1.weight"]["step"] == whole.sync.state["fc1.weight"]["step"]
    assert FRESH_AGAIN not in caplog.text
    assert t.fit(trainer_data(), epochs=2, resume=resume) == []  # all done: nothing more


def test_a_ctrl_c_stop_without_out_dir_notes_nothing_was_saved_and_resumes_in_memory(caplog):
    whole = _trainer()
    whole.fit(trainer_data(), epochs=2)
    t = _trainer()
    step = signal_at(t, 7, signal.SIGINT)  # mid-way through epoch 2
    with pytest.raises(Preempted) as stopped:
        t.fit(trainer_data(), epochs=2)
    assert str(stopped.value) == "stopped by SIGINT after step 7"  # the line as it was
    _assert_way_on(
        stopped.value,
        caplog,
        "no out_dir (--out): nothing saved; fit(..., resume=True) on this Trainer continues "
        "from its weights in memory",
    )
    t.train_step = step
    history = t.fit(trainer_data(), epochs=2, resume=True)
    _assert_same(_weights(t), _weights(whole))
    assert history[0]["train_loss"] == whole.history[1]["train_loss"]  # the epoch's sums kept


def test_a_ctrl_c_stop_with_out_dir_names_the_checkpoint_and_the_way_on(tmp_path, caplog):
    t = _trainer(tmp_path / "run")
    signal_at(t, 3, signal.SIGINT)
    with pytest.raises(Preempted) as stopped:
        t.fit(trainer_data(), epochs=1)
    assert str(stopped.value) == "stopped by SIGINT after step 3"
    _assert_way_on(
        stopped.value,
        caplog,
        f"checkpoint saved in {tmp_path / 'run'}; fit(..., resume=True) (--resume) continues it",
    )


def test_a_second_fit_starting_afresh_from_trained_weights_says_so_once(caplog):
    t = _trainer()
    t.fit(trainer_data(), epochs=1)
    with caplog.at_level(logging.WARNING):
        assert [r["epoch"] for r in t.fit(trainer_data(), epochs=1)] == [1]
        t.fit(trainer_data(), epochs=1)
    assert caplog.text.count(FRESH_AGAIN) == 1
    assert "(to step 5)" in caplog.text


def test_resume_true_on_a_trainer_that_never_trained_is_refused_as_before():
    with pytest.raises(Exception, match=r"resume=True \(--resume\) needs an output directory"):
        _trainer().fit(trainer_data(), epochs=1, resume=True)


@pytest.mark.parametrize("sync", [LocalSync, _one_rank_mpi])
def test_a_second_ctrl_c_in_a_steps_updates_resumes_in_memory_as_one_run(sync, caplog):
    """The held interrupt is raised once the step is counted in the epoch too: the position
    names the next batch, and the run goes on from it as one never cut, the epoch's loss
    too where the sums need no transport (LocalSync); MPISync's went with the fit, said."""
    whole = _trainer(sync=sync)
    whole.fit(trainer_data(), epochs=2)
    t = _trainer(sync=sync)
    optimizer = t.sync.optimizer
    update, calls = optimizer.update, [0]

    def two_ctrl_cs_mid_step(*args, **kwargs):
        update(*args, **kwargs)
        calls[0] += 1
        if calls[0] == 6 * len(t.params) + 3:  # in step 7, the second epoch's second
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)

    optimizer.update = two_ctrl_cs_mid_step
    with pytest.raises(KeyboardInterrupt):
        t.fit(trainer_data(), epochs=2)
    assert (t.pos.step, t.pos.step_in_epoch) == (7, 2)
    del optimizer.update
    try:
        with caplog.at_level(logging.WARNING):
            history = t.fit(trainer_data(), epochs=2, resume=True)
    finally:
        t.sync.close()
        whole.sync.close()
    _assert_same(_weights(t), _weights(whole))
    lost = "fit(resume=True) goes on from step 2 of epoch 2, whose metric sums of the steps before"
    if sync is LocalSync:
        assert history[0]["train_loss"] == whole.history[1]["train_loss"]
        assert history[0]["train_acc"] == whole.history[1]["train_acc"]
        assert lost not in caplog.text
    else:
        assert lost in caplog.text


def test_a_resume_in_memory_on_another_training_set_is_refused_as_a_checkpoints_is():
    """Stopped 3 steps into an epoch of 37 examples, resumed on 45: another batch order (and
    a step past a smaller set's epoch trained nothing), which a checkpoint's resume refuses
    too; the same set goes on."""
    t = _trainer()
    step = signal_at(t, 3, signal.SIGINT)
    with pytest.raises(Preempted):
        t.fit(trainer_data(), epochs=1)
    t.train_step = step
    with pytest.raises(CheckpointError) as refused:
        t.fit(trainer_data(45), epochs=1, resume="auto")
    assert str(refused.value) == (
        "fit(resume='auto') without out_dir goes on from this Trainer's position in memory "
        "(step 3, epoch 1), which it trained on another training set (37 examples then, 45 "
        "now; their fingerprints differ): its batch order would not go on. Pass the same "
        "training set, or resume=False to start the epochs again on this one from the trained "
        "weights"
    )
    assert (t.pos.step, t.pos.step_in_epoch) == (3, 3)  # nothing trained
    assert [r["step"] for r in t.fit(trainer_data(), epochs=1, resume="auto")] == [5]


def test_a_step_cut_after_its_count_resumes_in_memory_without_training_its_batch_again(
    monkeypatch, caplog
):
    """Cut (a third Ctrl-C) as the first step's firing order is agreed: its updates made and
    the step counted, but not yet in its epoch, so the resume trained its batch a second time
    (6 steps for 5, other weights). It counts in its epoch; its loss never reached the sums,
    which the resume says it counts without."""
    whole = _trainer()
    whole.fit(trainer_data(), epochs=1)
    first_step = ParamLayout.first_step

    def cut(*args):
        monkeypatch.setattr(ParamLayout, "first_step", first_step)
        raise KeyboardInterrupt

    monkeypatch.setattr(ParamLayout, "first_step", cut)
    t = _trainer()
    with pytest.raises(KeyboardInterrupt):
        t.fit(trainer_data(), epochs=1)
    assert (t.pos.step, t.pos.step_in_epoch, t.pos.sums) == (1, 1, {})
    with caplog.at_level(logging.WARNING):
        t.fit(trainer_data(), epochs=1, resume=True)
    assert t.pos.step == whole.pos.step == 5
    _assert_same(_weights(t), _weights(whole))
    assert "fit(resume=True) goes on from step 1 of epoch 1, whose metric sums" in caplog.text
