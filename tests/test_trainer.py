"""The training loop: the step protocol, learning, reproducibility, exact resume, many ranks."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.checkpoint import CheckpointError, load_checkpoint, restore_checkpoint
from distconv.data import as_arrays, synthetic
from distconv.epoch_tally import UNREPEATED
from distconv.init import set_seed
from distconv.layers.base import LayerError
from distconv.layers.loss import SoftmaxCrossEntropy
from distconv.models import lenet
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.run_dir import CHIEF, RunDirError
from distconv.sync import SyncError, create_sync
from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.sync.threaded_sync import ThreadedSync, run_ranks


def _net(init_seed=0):
    set_seed(init_seed)
    return lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)


def _trainer(out_dir=None, *, init_seed=0, optimizer="adam", batch_size=16, sync=None, **kw):
    sync = sync or create_sync("local", optimizer=create_optimizer(optimizer, lr=0.01))
    return Trainer(_net(init_seed), sync, batch_size, out_dir=out_dir, progress=False, **kw)


def _weights(trainer):
    return {p.name: p.value.copy() for p in trainer.params}


def _records(path):
    return [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]


def test_training_learns_and_records_every_epoch(data, tmp_path):
    train, test = data
    t = _trainer(tmp_path)
    history = t.fit(train, test, epochs=6)
    assert [r["epoch"] for r in history] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in history] == [15, 30, 45, 60, 75, 90]  # 240 examples / 16
    assert history[-1]["train_loss"] < 0.2 * history[0]["train_loss"]
    assert history[0]["test_acc"] < 0.5 and history[-1]["test_acc"] >= 0.9
    assert set(history[0]) >= {"train_acc", "test_loss", "seconds", "examples_per_second"}
    assert history[0]["global_batch"] == 16 and history[0]["world_size"] == 1
    records = _records(tmp_path)
    run = records[0].pop("run")  # the first line says which run it is: a sweep's told apart
    assert run["optimizer"]["name"] == "adam" and run["optimizer"]["lr"] == 0.01, run
    assert run["batch_size"] == 16 and run["job"] is None, run
    assert records == history
    assert (tmp_path / "metrics.png").read_bytes()[:4] == b"\x89PNG"
    latest = t.checkpoints.run.latest()
    ckpt = load_checkpoint(latest.part("chief"))
    assert (latest.step, ckpt.epoch, ckpt.step, ckpt.seed) == (90, 6, 90, 0)
    assert ckpt.optimizer["name"] == "adam" and ckpt.extra["global_batch"] == 16
    for p in t.params:
        np.testing.assert_array_equal(ckpt.params[p.name], p.value)
    assert [m.step for m in t.checkpoints.run.manifests()] == [60, 75, 90]  # keeps the last 3


def test_same_seed_same_weights_bit_for_bit(data):
    train, test = data
    a, b = _trainer(), _trainer()
    a.fit(train, test, epochs=2)
    b.fit(train, test, epochs=2)
    wa, wb = _weights(a), _weights(b)
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)
    c = _trainer(seed=1)  # another shuffle seed: other weights
    c.fit(train, test, epochs=2)
    assert not np.array_equal(_weights(c)["conv1.weight"], wa["conv1.weight"])


def test_evaluation_leaves_no_columns_held_for_a_backward(data):
    """A training step keeps each conv layer's columns until its backward; evaluation keeps
    none, so no memory stays held for a backward that never comes."""
    train, test = data
    t = _trainer()
    t.fit(train, epochs=1)
    convs = [layer for name, layer in t.network.layers.items() if name.startswith("conv")]
    t._forward(as_arrays(train), np.arange(16))  # a training forward keeps them
    assert all(layer._columns is not None and layer._columns.nbytes for layer in convs)
    t.evaluate(test)
    assert convs and all(layer._columns is None for layer in convs)


@pytest.mark.parametrize("optimizer", ["adam", "momentum"])
def test_resume_mid_epoch_gives_the_weights_of_an_uninterrupted_run(data, tmp_path, optimizer):
    train, test = data
    whole = _trainer(tmp_path / "whole", optimizer=optimizer)
    whole.fit(train, test, epochs=3)

    # checkpoints at steps 7, 14, 15 (epoch end), 21, 28, 30 (epoch end); the last 3 stay
    first = _trainer(tmp_path / "split", optimizer=optimizer, checkpoint_every=7)
    first.fit(train, test, epochs=2)
    # as if killed after step 21, in the middle of epoch 2
    for m in first.checkpoints.run.manifests():
        if m.step > 21:
            m.path.unlink()
    assert first.checkpoints.run.latest().step == 21
    # a new process: the model is built again, from another init seed, which the checkpoint
    # must overwrite entirely
    third = _trainer(tmp_path / "split", optimizer=optimizer, init_seed=123, checkpoint_every=7)
    history = third.fit(train, test, epochs=3, resume="auto")
    assert [r["epoch"] for r in history] == [2, 3]
    assert third.pos.step == 45
    w1, w2 = _weights(whole), _weights(third)
    for name in w1:
        np.testing.assert_array_equal(w2[name], w1[name], err_msg=name)
    for name, state in whole.sync.state_dict().items():
        for key, value in state.items():
            np.testing.assert_array_equal(third.sync.state_dict()[name][key], value)
    drop = (*UNREPEATED, "run")  # timings; the split run's first line names its own run
    strip = [{k: v for k, v in r.items() if k not in drop} for r in _records(tmp_path / "split")]
    expected = [{k: v for k, v in r.items() if k not in drop} for r in _records(tmp_path / "whole")]
    assert [r["epoch"] for r in strip] == [1, 2, 3]
    for ours, theirs in zip(strip, expected):
        assert ours.keys() == theirs.keys()
        for key in ours:
            assert ours[key] == pytest.approx(theirs[key], rel=1e-6), key  # float32 sums


def test_a_step_cut_short_leaves_no_gradient_to_a_resume_in_the_same_process(data, tmp_path):
    """A second Ctrl-C (KeyboardInterrupt) in the last pass of an accumulating step left the
    earlier pass's gradients in the parameters: ``fit(resume=True)`` of the same trainer added
    them into its first step and ended with other weights than an uninterrupted run."""
    train, _ = data
    whole = _trainer(tmp_path / "whole", optimizer="sgd", batch_size=8, accumulate=2)
    whole.fit(train, epochs=1)
    t = _trainer(tmp_path / "cut", optimizer="sgd", batch_size=8, accumulate=2, checkpoint_every=1)
    backward, calls = t.network.backward, []

    def cut_at_step_3_pass_2(*args, **kwargs):
        calls.append(args)
        if len(calls) == 6:
            raise KeyboardInterrupt
        backward(*args, **kwargs)

    t.network.backward = cut_at_step_3_pass_2
    with pytest.raises(KeyboardInterrupt):
        t.fit(train, epochs=1)
    assert t.pos.step == 2 and t.checkpoints.run.latest().step == 2
    t.network.backward = backward
    t.fit(train, epochs=1, resume=True)
    for name, value in _weights(whole).items():
        np.testing.assert_array_equal(_weights(t)[name], value, err_msg=name)


class _Abandons(LocalSync):
    """LocalSync counting the steps the Trainer abandons."""

    abandoned = 0

    def abandon_step(self) -> None:
        self.abandoned += 1


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_step_that_raises_is_abandoned_and_its_error_goes_on(data, error):
    """The sync lets go of a step that will not finish (a parameter server's rows of it), once,
    and only for a step that raised; the error reaches the caller unchanged."""
    train, _ = data
    sync = _Abandons(create_optimizer("sgd", lr=0.01))
    t = _trainer(sync=sync, batch_size=8, accumulate=2)
    backward, calls = t.network.backward, []

    def fails_at_step_2_pass_1(*args, **kwargs):
        calls.append(args)
        if len(calls) == 3:
            raise error("in the backward")
        backward(*args, **kwargs)

    t.network.backward = fails_at_step_2_pass_1
    with pytest.raises(error, match="in the backward"):
        t.fit(train, epochs=1)
    assert (sync.abandoned, t.pos.step) == (1, 1)
    t.network.backward = backward
    t.fit(train, epochs=1)
    assert sync.abandoned == 1


def test_a_directory_holding_a_run_is_refused_unless_told(data, tmp_path):
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=1)
    before = (tmp_path / "metrics.jsonl").read_bytes()
    words = r"already holds a run.*--resume to.*--overwrite to.*\(in a script: resume=True, "
    with pytest.raises(RunDirError, match=words):
        _trainer(tmp_path).fit(train, test, epochs=1)
    assert (tmp_path / "metrics.jsonl").read_bytes() == before
    t = _trainer(tmp_path)
    t.fit(train, test, epochs=1, resume="overwrite")
    assert [m.step for m in t.checkpoints.run.manifests()] == [15]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_run_that_diverged_in_its_first_epoch_does_not_block_the_same_command(data, tmp_path):
    """It leaves an empty metrics.jsonl and no checkpoint: the same command with a lower rate
    was refused (already holds a run), and --resume, which the refusal suggests, found no
    checkpoint."""
    train, test = data
    from distconv.trainer import TrainingError

    too_fast = create_sync("local", optimizer=create_optimizer("sgd", lr=1e30))
    with pytest.raises(TrainingError, match="NaN or infinite in epoch 1"):
        _trainer(tmp_path, sync=too_fast).fit(train, test, epochs=1)
    assert (tmp_path / "metrics.jsonl").read_bytes() == b""
    assert [r["epoch"] for r in _trainer(tmp_path).fit(train, test, epochs=1)] == [1]


def test_resume_auto_starts_fresh_and_strict_resume_needs_a_checkpoint(data, tmp_path):
    train, test = data
    with pytest.raises(CheckpointError, match="no complete checkpoint"):
        _trainer(tmp_path / "a").fit(train, test, epochs=1, resume=True)
    assert len(_trainer(tmp_path / "b").fit(train, test, epochs=1, resume="auto")) == 1
    t = _trainer(tmp_path / "b")
    assert t.fit(train, test, epochs=1, resume="auto") == []  # nothing left to do
    assert t.pos.epoch == 1 and len(_records(tmp_path / "b")) == 1


def test_resume_refuses_a_checkpoint_of_another_run(data, tmp_path):
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=1)
    with pytest.raises(CheckpointError, match=r"global_batch: checkpoint 16, this run 8") as e:
        _trainer(tmp_path, batch_size=8).fit(train, test, epochs=2, resume=True)
    assert "The global batch (world size x batch size x accumulate) must stay" in str(e.value)
    with pytest.raises(CheckpointError, match=r"seed: checkpoint 0, this run 5") as e:
        _trainer(tmp_path, seed=5).fit(train, test, epochs=2, resume=True)
    assert "global batch" not in str(e.value)  # said only where it differs
    with pytest.raises(CheckpointError, match=r"optimizer: checkpoint \{'name': 'adam'"):
        _trainer(tmp_path, optimizer="sgd").fit(train, test, epochs=2, resume=True)


def test_resume_refuses_other_training_data_naming_what_differs(data, tmp_path):
    """A set of another length or content does not continue the checkpoint's batch order: a
    resume on it trained on a shuffled mix of the old and the new order, without a word."""
    train, test = data
    t = _trainer(tmp_path)
    t.fit(train, test, epochs=1)
    fewer = {k: v[:-16] for k, v in as_arrays(train).items()}
    with pytest.raises(CheckpointError, match=r"train_data.examples: checkpoint 240, this run 224"):
        _trainer(tmp_path).fit(fewer, test, epochs=2, resume=True)
    # fine-tuning is a new run that loads the weights: the way the message names
    tuned = _trainer(tmp_path / "tuned")
    restore_checkpoint(t.checkpoints.run.manifests()[-1].part(CHIEF), tuned.params)
    assert all(np.array_equal(p.value, q.value) for p, q in zip(tuned.params, t.params))
    assert len(tuned.fit(fewer, test, epochs=1)) == 1
    other = {k: v.copy() for k, v in as_arrays(train).items()}
    other["image"][0] += 1  # the first example is one the fingerprint samples
    with pytest.raises(CheckpointError, match=r"train_data.sampled_examples_sha256: checkpoint '"):
        _trainer(tmp_path).fit(other, test, epochs=2, resume=True)
    # another test set trains the same weights: it is no reason to refuse
    assert len(_trainer(tmp_path).fit(train, train, epochs=2, resume=True)) == 1


def test_the_same_data_in_another_input_type_resumes_where_the_trainer_casts_it(data, tmp_path):
    """The trainer feeds its dtype: float64 images cast to float32 are the float32 images it
    trained on; without a dtype to cast to, they are other inputs."""
    train, test = data
    _trainer(tmp_path, dtype=np.float32).fit(train, test, epochs=1)
    wide = {
        k: (v.astype(np.float64) if v.dtype == np.float32 else v)
        for k, v in as_arrays(train).items()
    }
    assert len(_trainer(tmp_path, dtype=np.float32).fit(wide, test, epochs=2, resume=True)) == 1
    with pytest.raises(CheckpointError, match=r"train_data.feeds: checkpoint .*float32.*float64"):
        _trainer(tmp_path).fit(wide, test, epochs=3, resume=True)


def test_a_second_run_on_the_same_directory_fails_at_once_naming_the_holder(data, tmp_path):
    train, _ = data
    first = _trainer(tmp_path)
    first.checkpoints.run.acquire()
    try:
        with pytest.raises(RunDirError, match=r"in use by pid \d+ on "):
            _trainer(tmp_path).fit(train, epochs=1)
    finally:
        first.checkpoints.run.release()


def _run_until(t, step, then, train, test):
    """Fit ``t`` for 2 epochs; right after optimizer step ``step``, call ``then()``."""
    take_step = t.train_step

    def step_then(*args):
        out = take_step(*args)
        if t.pos.step == step:
            then()
        return out

    t.train_step = step_then
    t.fit(train, test, epochs=2)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_diverging_loss_stops_with_the_step_range_and_writes_no_non_finite_checkpoint(
    data, tmp_path
):
    from distconv.trainer import TrainingError

    train, test = data
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.01))
    t = Trainer(_net(), sync, 16, out_dir=tmp_path, progress=False, checkpoint_every=4)

    def blow_up():  # after the step-4 checkpoint the loss diverges: steps 6-8 use this rate
        sync.optimizer.lr = 1e30

    with pytest.raises(TrainingError, match=r"epoch 1, between steps 5 and 8"):
        _run_until(t, 5, blow_up, train, test)
    manifests = t.checkpoints.run.manifests()
    assert [m.step for m in manifests] == [4]  # the step-8 checkpoint was never written
    ckpt = load_checkpoint(manifests[0].part("chief"))
    assert all(np.isfinite(a).all() for a in ckpt.params.values())


def test_a_parameter_overflowed_by_the_last_step_is_not_checkpointed(data, tmp_path):
    # the loss of step 8 was computed before its update made a weight infinite: only the
    # check of the parameters themselves keeps the step-8 checkpoint from holding it
    from distconv.trainer import TrainingError

    train, test = data
    t = _trainer(tmp_path, checkpoint_every=4)

    def overflow():
        t.params[-1].value[...] = np.inf

    with pytest.raises(TrainingError, match=rf"parameter '{t.params[-1].name}' holds NaN or inf"):
        _run_until(t, 8, overflow, train, test)
    assert [m.step for m in t.checkpoints.run.manifests()] == [4]
    assert not list((tmp_path / "checkpoints").glob("step-00000008*"))


def test_step_protocol_every_parameter_once_in_reverse_layer_order(data):
    train, _ = data

    class Recording(SyncStrategy):
        def __init__(self):
            super().__init__(create_optimizer("sgd"))
            self.events = []

        def start_step(self, examples):
            super().start_step(examples)
            self.events.append(("start", examples))

        def on_gradient(self, param):
            self.events.append(param.name)
            param.grad[...] = 0

        def finish_step(self):
            self.events.append("finish")

        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    sync = Recording()
    t = Trainer(_net(), sync, 8, progress=False)
    t.fit({"image": train.x[:8], "label": train.y[:8]}, epochs=1)
    assert [p.name for p in sync.params] == [p.name for p in t.network.parameters()]
    assert sync.events[0] == ("start", 8) and sync.events[-1] == "finish"
    names = sync.events[1:-1]
    assert sorted(names) == sorted(p.name for p in t.network.parameters())
    assert sync.firing_order == names
    layers = [n.split(".")[0] for n in names]
    assert layers.index("fc2") < layers.index("fc1") < layers.index("conv2") < layers.index("conv1")


def test_a_regression_network_without_labels_trains(tmp_path):
    """Any network ending in a loss: MSE on float targets, no accuracy."""
    from distconv.layers import FullyConnected, MSELoss
    from distconv.network import Network

    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 3))
    target = x @ np.array([[1.0], [-2.0], [0.5]]) + 0.1
    net = Network()
    net.add("fc", FullyConnected(3, 1), "x")
    net.add("loss", MSELoss(), ["fc", "target"])
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.1))
    t = Trainer(net, sync, 32, dtype="float64", progress=False, out_dir=tmp_path)
    history = t.fit({"x": x, "target": target}, {"x": x, "target": target}, epochs=20)
    assert "train_acc" not in history[0] and "test_acc" not in history[0]
    assert history[-1]["test_loss"] < 1e-4 < history[0]["train_loss"]
    np.testing.assert_allclose(net["fc"].weight.value.ravel(), [1.0, -2.0, 0.5], atol=1e-2)


def test_bad_loss_layer_name():
    with pytest.raises(ValueError, match="no layer 'xent'"):
        _trainer(loss="xent")


@pytest.mark.parametrize("size,flat", [(8, 64 * 2 * 2), (28, 64 * 7 * 7)])
def test_lenet_sizes_its_classifier_from_the_image(size, flat):
    set_seed(0)
    net = lenet((1, size, size))
    assert net["fc1"].in_features == flat
    x = np.random.default_rng(0).random((3, 1, size, size), dtype=np.float32)
    out = net.forward({"image": x, "label": Arg(ids=np.array([0, 1, 9]))})
    assert out["fc2"].shape == (3, 10)


def test_lr_decay_scales_each_epoch_and_the_config_keeps_the_base_rate(data):
    train, _ = data
    t = _trainer(lr_decay=0.5)
    t.fit(train, epochs=3)
    assert t.sync.optimizer.lr == pytest.approx(0.01 * 0.25)
    assert t.sync.optimizer_config()["lr"] == 0.01


# -- many ranks, one global batch ---------------------------------------------------------------

# with a global batch of 16 the last step has 1 example: one rank of two gets none, and one of
# two accumulation passes is empty
N_EXAMPLES = 97


def _regression_free_data():
    d = synthetic(n=N_EXAMPLES, num_classes=4, noise=0.3, seed=5)
    return {"image": d.x.astype(np.float64), "label": d.y}


def _train_ranks(world, batch_size, accumulate, optimizer, epochs=2):
    arrays = _regression_free_data()

    def body(rank, w):
        sync = ThreadedSync(create_optimizer(optimizer, lr=0.05), w, rank)
        t = Trainer(
            _net(rank), sync, batch_size, accumulate=accumulate, dtype="float64", progress=False
        )
        history = t.fit(arrays, arrays, epochs=epochs)
        return _weights(t), history

    return run_ranks(world, body)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_two_ranks_of_b_equal_one_rank_of_2b_in_float64(optimizer):
    ((single, h1),) = _train_ranks(1, 16, 1, optimizer)
    (w0, h2a), (w1, h2b) = _train_ranks(2, 8, 1, optimizer)
    ((acc, h3),) = _train_ranks(1, 8, 2, optimizer)
    for name, ref in single.items():
        for other in (w0, w1, acc):
            np.testing.assert_allclose(other[name], ref, rtol=1e-10, atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(w0[name], w1[name])  # ranks end identical
    assert h1[-1]["step"] == h2a[-1]["step"] == h3[-1]["step"] == 14  # 7 steps per epoch
    for key in ("train_loss", "train_acc", "test_loss", "test_acc"):
        assert h2a[-1][key] == pytest.approx(h1[-1][key], rel=1e-9)
        assert h2a[-1][key] == h2b[-1][key]
    assert len(h2a[-1]["examples_per_second_per_rank"]) == 2


def test_ranks_that_disagree_stop_naming_the_first_difference():
    arrays = _regression_free_data()
    nets = [_net(), _net()]

    def body(rank, w):
        sync = ThreadedSync(create_optimizer("sgd"), w, rank)
        t = Trainer(nets[rank], sync, 8 if rank == 0 else 4, progress=False)
        t.fit(arrays, epochs=1)

    with pytest.raises(SyncError, match=r"config.batch_size: 8 here, 4 there|4 here, 8 there"):
        run_ranks(2, body)


def test_resume_with_another_world_size_keeping_the_global_batch(tmp_path):
    arrays = _regression_free_data()

    def run(world, batch_size, epochs, resume):
        nets = [_net(rank) for rank in range(world)]

        def body(rank, w):
            sync = ThreadedSync(create_optimizer("adam", lr=0.05), w, rank)
            t = Trainer(
                nets[rank],
                sync,
                batch_size,
                dtype="float64",
                progress=False,
                out_dir=tmp_path / "run",
            )
            t.fit(arrays, epochs=epochs, resume=resume)
            return _weights(t)

        return run_ranks(world, body)

    (whole,) = _train_ranks(1, 16, 1, "adam", epochs=2)[0:1]
    run(2, 8, 1, False)  # one epoch on 2 ranks of 8, then the second on 1 rank of 16
    (resumed,) = run(1, 16, 2, True)
    for name, ref in whole[0].items():
        np.testing.assert_allclose(resumed[name], ref, rtol=1e-10, atol=1e-12, err_msg=name)
    with pytest.raises(CheckpointError, match="global_batch: checkpoint 16, this run 8"):
        run(1, 8, 3, True)


def test_resuming_several_ranks_with_frozen_parameters_is_refused(tmp_path):
    arrays = _regression_free_data()

    def run(resume):
        nets = [_net(rank) for rank in range(2)]
        for net in nets:
            net["conv1"].weight.set_static()

        def body(rank, w):
            sync = ThreadedSync(create_optimizer("sgd"), w, rank)
            t = Trainer(nets[rank], sync, 8, progress=False, out_dir=tmp_path)
            t.fit(arrays, epochs=2 if resume else 1, resume=resume)

        run_ranks(2, body)

    run(False)
    with pytest.raises(SyncError, match=r"frozen parameters \['conv1.weight'\]"):
        run(True)


def test_a_damaged_newest_checkpoint_is_set_aside_so_new_ones_outlive_it(data, tmp_path):
    # the run falls back to step 14; the unreadable step-15 manifest must not count as the newest
    # when pruning, or it would outlive (and finally be all that is left of) the new checkpoints
    train, test = data
    first = _trainer(tmp_path, checkpoint_every=7, keep_checkpoints=2)
    first.fit(train, test, epochs=1)  # checkpoints 7, 14, 15 (epoch end); 14 and 15 stay
    run = first.checkpoints.run
    newest = run.latest()
    assert newest.step == 15
    newest.part("chief").write_bytes(b"not a checkpoint")
    again = _trainer(tmp_path, checkpoint_every=7, keep_checkpoints=2)
    again.fit(train, test, epochs=2, resume="auto")
    assert [m.step for m in run.manifests()] == [28, 30]
    assert (run.checkpoint_root / "step-00000015.json.unusable").exists()


def test_the_chief_refreshes_then_asks_remote_holders_to_keep_one_part_more(data, tmp_path):
    # remote holders prune before the manifest is committed; keeping one more part means every
    # kept manifest still finds its parts if the chief dies in between
    calls = []

    class Recording(create_sync("local", optimizer=create_optimizer("sgd")).__class__):
        def refresh_parameters(self):
            calls.append("refresh")

        def save_remote_parts(self, step, keep=None):
            calls.append(("parts", step, keep))
            return {}

    sync = Recording(create_optimizer("sgd", lr=0.01))
    _trainer(tmp_path, sync=sync, checkpoint_every=7, keep_checkpoints=2).fit(*data, epochs=1)
    # at the epoch's end every rank refreshes once its steps are all in, then the chief's save
    assert calls == ["refresh", ("parts", 7, 3), "refresh", ("parts", 14, 3)] + [
        "refresh",
        "refresh",
        ("parts", 15, 3),
    ]


@pytest.mark.timeout(120)
def test_whole_training_steps_are_bitwise_the_same_on_one_thread_and_two(monkeypatch, pool_use):
    """The kernels split a batch into chunks by shape alone: whole steps, not just single
    kernels, give the same bits on one kernel thread and on two (issue 12's promise).

    LeNet at 28x28 with 64 samples is large enough that conv2's chunks really run on the pool
    (checked), so a chunking that followed the thread count would change the weights here.
    """
    from distconv.backend import set_device
    from distconv.kernels import conv_layout

    for var in ("DISTCONV_AUTOTUNE", "DISTCONV_DEVICE", "DISTCONV_CUDNN"):
        monkeypatch.delenv(var, raising=False)  # the cost model's choices, on the CPU
    set_device("cpu")
    monkeypatch.setattr(conv_layout, "_tuned", {})
    train = synthetic(n=192, image_shape=(1, 28, 28), num_classes=10, seed=5)
    submitted = pool_use

    def weights_after_three_steps(threads: str) -> dict:
        monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
        set_seed(0)
        net = lenet((1, 28, 28), num_classes=10)
        sync = create_sync("local", optimizer=create_optimizer("adam", lr=0.01))
        t = Trainer(net, sync, 64, progress=False)
        t.fit(train, None, epochs=1)
        return _weights(t)

    one = weights_after_three_steps("1")
    assert submitted == []  # one thread: every chunk ran in line
    two = weights_after_three_steps("2")
    assert submitted and set(submitted) == {2}  # two threads: chunks went to the pool
    assert one.keys() == two.keys()
    for name in one:
        np.testing.assert_array_equal(one[name], two[name], err_msg=name)


@pytest.mark.parametrize(
    ("optimizers", "said"),
    [
        ((("sgd", 0.1), ("sgd", 0.2)), r"optimizer\.lr: (0\.1 here, 0\.2|0\.2 here, 0\.1) there"),
        (
            (("sgd", 0.1), ("adam", 0.1)),
            r"optimizer\.name: ('sgd' here, 'adam'|'adam' here, 'sgd') there",
        ),
    ],
)
def test_ranks_with_other_optimizer_settings_are_told_which_one(optimizers, said):
    """Not the two settings whole: the first that differs inside them, the kind first."""
    arrays = _regression_free_data()
    nets = [_net(), _net()]

    def body(rank, w):
        name, lr = optimizers[rank]
        sync = ThreadedSync(create_optimizer(name, lr=lr), w, rank)
        Trainer(nets[rank], sync, 8, progress=False).fit(arrays, epochs=1)

    with pytest.raises(SyncError, match=said):
        run_ranks(2, body)


@pytest.mark.parametrize("kind", ["local", "mpi"])  # mpi: one rank, the same code path
def test_a_new_model_on_a_used_sync_starts_with_fresh_optimizer_state(data, kind):
    """A sweep on one sync: each model's Adam moments are its own, as on a fresh sync, while a
    second fit of the same model keeps its state (the Trainer's resume-free continuation)."""
    train, test = data

    def trained(sync, init_seed, hidden=16):
        set_seed(init_seed)
        net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=hidden)
        trainer = Trainer(net, sync, 16, progress=False, dtype=np.float64)
        trainer.fit(train, test, epochs=1)
        return _weights(trainer)

    def fresh():
        return create_sync(kind, optimizer=create_optimizer("adam", lr=0.01))

    shared = fresh()
    trained(shared, init_seed=1)
    second = trained(shared, init_seed=2)
    alone = trained(fresh(), init_seed=2)
    assert second.keys() == alone.keys()
    for name in alone:
        np.testing.assert_array_equal(second[name], alone[name], err_msg=name)
    trained(shared, init_seed=3, hidden=12)  # other shapes under the same names
    shared.close()


def test_a_checkpoint_of_a_new_model_on_a_used_sync_holds_only_its_own_state(data, tmp_path):
    """The sync still holds the last model's state under names the new one lacks (conv3): its
    checkpoint carried them, and resuming it in a new process failed in a bare KeyError."""
    train, _ = data

    def net(channels):
        set_seed(0)
        return lenet((1, 8, 8), num_classes=4, channels=channels, hidden=16)

    def adam():
        return create_sync("local", optimizer=create_optimizer("adam", lr=0.01))

    shared = adam()
    Trainer(net((4, 8, 16)), shared, 16, progress=False).fit(train, epochs=1)
    second = Trainer(net((4, 8)), shared, 16, progress=False, out_dir=tmp_path)
    second.fit(train, epochs=1)
    ckpt = load_checkpoint(second.checkpoints.run.latest().part(CHIEF))
    assert sorted(ckpt.optim_state) == sorted(p.name for p in second.params)
    again = Trainer(net((4, 8)), adam(), 16, progress=False, out_dir=tmp_path)
    assert [r["epoch"] for r in again.fit(train, epochs=2, resume=True)] == [2]


def test_data_that_is_not_arrays_by_feed_name_is_refused_naming_what_it_is(data):
    """A bare array, or lists, failed inside indexing with numpy's words."""
    train, _ = data
    trainer = _trainer()
    with pytest.raises(TypeError, match=r"a dict of arrays by feed name .*got ndarray"):
        trainer.fit(train.x, epochs=1)
    with pytest.raises(TypeError, match=r"feed 'label' holds list, not an array"):
        trainer.fit({"image": train.x, "label": list(train.y)}, epochs=1)


def test_labels_in_a_column_count_right_answers_as_flat_labels_do(data):
    """Labels of shape (N, 1), which the loss reads flat, were compared with the (N,) answers
    by broadcasting: N x N comparisons, an accuracy above 1 and no error."""
    train, test = data
    flat = {"image": train.x, "label": train.y}
    column = {"image": train.x, "label": train.y[:, None]}
    tests = ({"image": test.x, "label": test.y}, {"image": test.x, "label": test.y[:, None]})
    a, b = _trainer(), _trainer()
    ra, rb = a.fit(flat, tests[0], epochs=1)[-1], b.fit(column, tests[1], epochs=1)[-1]
    assert 0 <= rb["train_acc"] <= 1 and 0 <= rb["test_acc"] <= 1
    assert (rb["train_acc"], rb["test_acc"]) == (ra["train_acc"], ra["test_acc"])
    assert b.evaluate(tests[1]) == a.evaluate(tests[0])


def test_integer_images_are_refused_naming_the_layer_and_the_cast(data):
    """uint8 images reach the first convolution as ids (feeds_of): it failed with
    AttributeError: 'NoneType' object has no attribute 'ndim'."""
    train, _ = data
    images = {"image": (train.x * 255).astype(np.uint8), "label": train.y}
    with pytest.raises(LayerError, match=r"Conv2D 'conv1': expected float values, got uint8 ids"):
        _trainer().fit(images, epochs=1)


@pytest.mark.parametrize("batch_size", [0, -1])
def test_evaluate_refuses_a_batch_size_below_one(data, batch_size):
    """A negative one ran no batch and returned test_loss 0.0 and test_acc 0.0 as results, and
    0 failed in range()."""
    _, test = data
    with pytest.raises(ValueError, match=f"batch_size must be an int >= 1, got {batch_size}"):
        _trainer().evaluate(test, batch_size=batch_size)


@pytest.mark.parametrize("batch_size, accumulate", [(16, 20), (1000, 1)])
def test_a_global_batch_larger_than_the_data_is_said(data, caplog, batch_size, accumulate):
    """--accumulate 20 or --batch-size 1000 on 240 examples trained one short step an epoch,
    and metrics.jsonl recorded the global batch asked for, without a word."""
    train, _ = data
    t = _trainer(batch_size=batch_size, accumulate=accumulate)
    with caplog.at_level(logging.WARNING, logger="distconv.trainer"):
        (record,) = t.fit(train, epochs=1)
    assert record["step"] == 1 and record["global_batch"] == 240  # what the step trained on
    assert f"asked for ({batch_size * accumulate}: 1 worker(s) x batch size" in caplog.text
    assert "exceeds the 240 training examples: each epoch is one step of all 240" in caplog.text


def test_an_integer_dtype_is_refused_before_any_weight_is_cast():
    """Trainer(dtype=np.int32) cast every weight to integers, which cannot learn."""
    net = _net()
    before = {p.name: p.value.dtype for p in net.parameters()}
    sync = create_sync("local", optimizer=create_optimizer("sgd"))
    with pytest.raises(TypeError, match=r"cannot train in int32: weights and inputs need a float"):
        Trainer(net, sync, 16, dtype=np.int32)
    assert {p.name: p.value.dtype for p in net.parameters()} == before


def test_an_integer_dtype_is_refused_for_a_network_without_weights():
    """With no weight to cast, Trainer(dtype=np.int32) went on to feed integer inputs."""
    net = Network()
    net.add("loss", SoftmaxCrossEntropy(), inputs=["x", "label"])
    sync = create_sync("local", optimizer=create_optimizer("sgd"))
    with pytest.raises(TypeError, match=r"cannot train in int32"):
        Trainer(net, sync, 16, dtype=np.int32)
    Trainer(net, sync, 16, dtype=np.float32)  # a float type is still taken


@pytest.mark.parametrize("dtype", ["int4", "uint4", "U8", "object", "complex64", "datetime64[s]"])
def test_every_dtype_that_is_not_a_float_is_refused_before_any_weight_is_cast(dtype):
    """ml_dtypes' int4 has numpy kind "V", as its bfloat16 has, and strings, objects or complex
    numbers are no integer kind: a check of kind "iub" let Trainer(dtype=...) cast every weight
    to them."""
    if dtype in ("int4", "uint4"):
        dtype = getattr(pytest.importorskip("ml_dtypes"), dtype)
    net = _net()
    before = {p.name: p.value.dtype for p in net.parameters()}
    sync = create_sync("local", optimizer=create_optimizer("sgd"))
    with pytest.raises(TypeError, match=r"cannot train in .*floating-point"):
        Trainer(net, sync, 16, dtype=dtype)
    assert {p.name: p.value.dtype for p in net.parameters()} == before


def test_the_default_cnn_trains_in_bfloat16_as_it_does_in_float32(data):
    """Trainer(dtype=bfloat16) cast the weights, then the fully connected layer refused its
    bfloat16 input: numpy's kind of an ml_dtypes float is "V", not "f"."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    train, test = data
    runs = {}
    for dtype in (np.float32, ml_dtypes.bfloat16):
        t = _trainer(dtype=dtype)
        runs[dtype] = t.fit(train, test, epochs=4)
        assert {p.value.dtype for p in t.params} == {np.dtype(dtype)}
    wide, narrow = runs[np.float32], runs[ml_dtypes.bfloat16]
    assert narrow[-1]["train_loss"] < narrow[0]["train_loss"] - 0.5, narrow  # it learns
    for a, b in zip(wide, narrow):  # and follows float32 within bfloat16's rounding
        assert abs(a["train_loss"] - b["train_loss"]) < 0.05, (wide, narrow)
    assert narrow[-1]["test_acc"] > wide[-1]["test_acc"] - 0.1, (wide, narrow)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
def test_a_float_type_the_kernels_or_checkpoints_cannot_carry_is_refused(dtype):
    """ml_dtypes' float8_e5m2 fails in im2col's strided view, float4 in safetensors' save:
    after a whole epoch of training, where a refusal up front costs nothing."""
    dtype = getattr(pytest.importorskip("ml_dtypes"), dtype)
    net = _net()
    sync = create_sync("local", optimizer=create_optimizer("sgd"))
    with pytest.raises(TypeError, match=r"cannot train in float[48].*\(float16, float32, float64"):
        Trainer(net, sync, 16, dtype=dtype)
    assert {p.value.dtype for p in net.parameters()} == {np.dtype(np.float32)}


NAMED_BFLOAT16 = {
    "Trainer": "net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)\n"
    "sync = create_sync('local', optimizer=create_optimizer('sgd'))\n"
    "print(Trainer(net, sync, 16, dtype='bfloat16').params[0].value.dtype)",
    "FullyConnected": "print(FullyConnected(4, 3, dtype='bfloat16').weight.value.dtype)",
    "Mixed": "print(Mixed([FullMatrixProjection(3, 2)], dtype='bfloat16').dtype)",
    "Parameter.cast": "fc = FullyConnected(4, 3)\nfc.weight.cast('bfloat16')\n"
    "print(fc.weight.value.dtype)",
}


@pytest.mark.parametrize("where", sorted(NAMED_BFLOAT16))
def test_bfloat16_may_be_named_before_ml_dtypes_is_imported(where):
    """numpy knows the name "bfloat16" only once ml_dtypes is imported: Trainer(dtype=
    "bfloat16") said "data type 'bfloat16' not understood" in a fresh process, and
    so did the layers' dtype= and Parameter.cast."""
    pytest.importorskip("ml_dtypes")
    script = (
        "import sys\n"
        "from distconv.layers import FullyConnected, Mixed\n"
        "from distconv.layers.projection import FullMatrixProjection\n"
        "from distconv.models import lenet\n"
        "from distconv.optim import create_optimizer\n"
        "from distconv.sync import create_sync\n"
        "from distconv.trainer import Trainer\n"
        "assert 'ml_dtypes' not in sys.modules\n" + NAMED_BFLOAT16[where]
    )
    argv = [sys.executable, "-c", script]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "bfloat16", done.stderr


@pytest.mark.parametrize("dtype", ["float16", "float64", "bfloat16"])
def test_every_float_dtype_is_cast(dtype):
    if dtype == "bfloat16":
        dtype = getattr(pytest.importorskip("ml_dtypes"), dtype)
    net = _net()
    Trainer(net, create_sync("local", optimizer=create_optimizer("sgd")), 16, dtype=dtype)
    assert {p.value.dtype for p in net.parameters()} == {np.dtype(dtype)}
    assert {p.grad.dtype for p in net.parameters()} == {np.dtype(dtype)}


@pytest.mark.timeout(120)
def test_a_float16_loss_is_summed_in_float32_within_a_batch_and_a_step():
    """A 16-bit loss was multiplied by the batch and summed over the passes in its own type:
    float16 stops at 65504, so a large pass (or --accumulate) read as "the loss became NaN or
    infinite" where float32 trained on, and evaluate gave a test loss of inf.
    Training's passes go through the same batch sum (Trainer._forward) as evaluation's."""
    big = synthetic(n=46_000, num_classes=4, noise=0.3, seed=3)  # 46000 x ~1.46 > 65504
    wide = _trainer(dtype=np.float32).evaluate(big, batch_size=46_000)["test_loss"]
    narrow = _trainer(dtype=np.float16).evaluate(big, batch_size=46_000)["test_loss"]
    assert np.isfinite(narrow) and abs(narrow - wide) < 0.01, (wide, narrow)
