"""The training loop: the step protocol, learning, reproducibility and exact resume."""

from __future__ import annotations

import json

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.checkpoint import CheckpointError, load_checkpoint
from distconv.data import split, synthetic
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync import create_sync
from distconv.sync.base import SyncStrategy
from distconv.trainer import Trainer


@pytest.fixture(scope="module")
def data():
    return split(synthetic(n=320, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)


def _trainer(out_dir=None, *, init_seed=0, seed=0, optimizer="adam", shard=(0, 1), **kw):
    set_seed(init_seed)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    sync = create_sync("local", optimizer=create_optimizer(optimizer, lr=0.01))
    return Trainer(net, sync, "loss", out_dir=out_dir, seed=seed, shard=shard, progress=False, **kw)


def _weights(trainer):
    return {p.name: p.value.copy() for p in trainer.params}


def test_training_learns_and_records_every_epoch(data, tmp_path):
    train, test = data
    t = _trainer(tmp_path)
    history = t.fit(train, test, epochs=6, batch_size=16)
    assert [r["epoch"] for r in history] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in history] == [15, 30, 45, 60, 75, 90]  # 240 examples / 16
    assert history[-1]["train_loss"] < 0.2 * history[0]["train_loss"]
    assert history[0]["test_acc"] < 0.5 and history[-1]["test_acc"] >= 0.9
    loss, acc = t.evaluate(test)
    assert (loss, acc) == (history[-1]["test_loss"], history[-1]["test_acc"])
    assert set(history[0]) >= {"train_acc", "test_loss", "seconds", "examples_per_second"}

    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert lines == history
    assert (tmp_path / "metrics.png").read_bytes()[:4] == b"\x89PNG"
    ckpt = load_checkpoint(tmp_path / "checkpoint.safetensors")
    assert (ckpt.epoch, ckpt.step, ckpt.seed) == (6, 90, 0)
    assert ckpt.optimizer["name"] == "adam" and ckpt.extra["batch_size"] == 16
    for p in t.params:
        np.testing.assert_array_equal(ckpt.params[p.name], p.value)


def test_same_seed_same_weights_bit_for_bit(data):
    train, test = data
    a, b = _trainer(), _trainer()
    a.fit(train, test, epochs=2, batch_size=16)
    b.fit(train, test, epochs=2, batch_size=16)
    wa, wb = _weights(a), _weights(b)
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)
    c = _trainer(seed=1)  # another shuffle seed: other weights
    c.fit(train, test, epochs=2, batch_size=16)
    assert not np.array_equal(_weights(c)["conv1.weight"], wa["conv1.weight"])


@pytest.mark.parametrize("optimizer", ["adam", "momentum"])
def test_resume_gives_the_weights_of_an_uninterrupted_run(data, tmp_path, optimizer):
    train, test = data
    whole = _trainer(tmp_path / "whole", optimizer=optimizer)
    whole.fit(train, test, epochs=4, batch_size=16)

    first = _trainer(tmp_path / "split", optimizer=optimizer)
    first.fit(train, test, epochs=2, batch_size=16)
    # a new process: the model is built again, here even from another init seed, which the
    # checkpoint must overwrite entirely
    second = _trainer(tmp_path / "split", optimizer=optimizer, init_seed=123)
    history = second.fit(train, test, epochs=4, batch_size=16, resume=True)

    assert [r["epoch"] for r in history] == [3, 4]
    assert second.step == whole.step == 60
    w1, w2 = _weights(whole), _weights(second)
    for name in w1:
        np.testing.assert_array_equal(w2[name], w1[name], err_msg=name)
    for name, state in whole.sync.state.items():
        for key, value in state.items():
            np.testing.assert_array_equal(second.sync.state[name][key], value)
    records = [
        json.loads(x) for x in (tmp_path / "split" / "metrics.jsonl").read_text().splitlines()
    ]
    expected = [
        json.loads(x) for x in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()
    ]
    drop = ("seconds", "examples_per_second")
    strip = [{k: v for k, v in r.items() if k not in drop} for r in records]
    assert strip == [{k: v for k, v in r.items() if k not in drop} for r in expected]


def test_resume_after_a_crash_between_metrics_and_checkpoint(data, tmp_path):
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=2, batch_size=16)
    with open(tmp_path / "metrics.jsonl", "a") as f:  # epoch 3 logged, then the crash
        f.write(json.dumps({"epoch": 3, "train_loss": 9.9}) + "\n")
    _trainer(tmp_path).fit(train, test, epochs=3, batch_size=16, resume=True)
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [1, 2, 3]
    assert records[-1]["train_loss"] != 9.9


def test_resume_refuses_a_checkpoint_of_another_run(data, tmp_path):
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=1, batch_size=16)
    with pytest.raises(CheckpointError, match=r"batch size: checkpoint 16, this run 8"):
        _trainer(tmp_path).fit(train, test, epochs=2, batch_size=8, resume=True)
    with pytest.raises(CheckpointError, match=r"seed: checkpoint 0, this run 5"):
        _trainer(tmp_path, seed=5).fit(train, test, epochs=2, batch_size=16, resume=True)
    with pytest.raises(CheckpointError, match=r"optimizer: checkpoint \{'name': 'adam'"):
        _trainer(tmp_path, optimizer="sgd").fit(train, test, epochs=2, batch_size=16, resume=True)
    with pytest.raises(CheckpointError, match="does not exist"):
        _trainer(tmp_path / "empty").fit(train, test, epochs=2, batch_size=16, resume=True)


def test_resume_with_nothing_left_to_do(data, tmp_path):
    train, test = data
    _trainer(tmp_path).fit(train, test, epochs=1, batch_size=16)
    t = _trainer(tmp_path)
    assert t.fit(train, test, epochs=1, batch_size=16, resume=True) == []
    assert t.epoch == 1 and len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 1


def test_evaluate_changes_nothing(data):
    train, test = data
    t = _trainer()
    before = _weights(t)
    t.evaluate(test)
    assert all(np.array_equal(before[k], v) for k, v in _weights(t).items())
    assert all(not p.grad.any() for p in t.params)


class RecordingSync(SyncStrategy):
    """Records the protocol; applies plain SGD so training still moves."""

    def __init__(self):
        super().__init__(create_optimizer("sgd"))
        self.events = []

    def start_step(self, examples):
        super().start_step(examples)
        self.events.append("start")

    def on_gradient(self, param):
        self.events.append(param.name)
        param.value -= 0.01 * param.grad
        param.grad[...] = 0

    def finish_step(self):
        self.events.append("finish")

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_step_protocol_every_parameter_once_in_reverse_layer_order(data):
    train, _ = data
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(2, 2), hidden=4)
    sync = RecordingSync()
    t = Trainer(net, sync, progress=False)
    assert [p.name for p in sync.params] == [p.name for p in net.parameters()]
    t.train_step(train.x[:8], train.y[:8])
    names = sync.events[1:-1]
    assert sync.events[0] == "start" and sync.events[-1] == "finish"
    assert sorted(names) == sorted(p.name for p in net.parameters())
    layers = [n.split(".")[0] for n in names]
    assert layers.index("fc2") < layers.index("fc1") < layers.index("conv2") < layers.index("conv1")


def test_non_chief_worker_trains_its_shard_and_writes_nothing(data, tmp_path):
    train, test = data
    t = _trainer(tmp_path, shard=(1, 2))
    history = t.fit(train, test, epochs=1, batch_size=16)
    assert history[0]["step"] == 8  # 240 // 2 = 120 examples, 16 per batch
    assert "test_acc" not in history[0]
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_bad_loss_layer_name(data):
    set_seed(0)
    net = lenet((1, 8, 8), num_classes=4, channels=(2, 2), hidden=4)
    with pytest.raises(ValueError, match="no layer 'xent'"):
        Trainer(net, RecordingSync(), "xent")
    with pytest.raises(ValueError, match=r"must read \(logits, label\)"):
        Trainer(net, RecordingSync(), "fc1")


@pytest.mark.parametrize("size,flat", [(8, 64 * 2 * 2), (28, 64 * 7 * 7)])
def test_lenet_sizes_its_classifier_from_the_image(size, flat):
    set_seed(0)
    net = lenet((1, size, size))
    assert net["fc1"].in_features == flat
    x = np.random.default_rng(0).random((3, 1, size, size), dtype=np.float32)
    out = net.forward({"image": x, "label": Arg(ids=np.array([0, 1, 9]))})
    assert out["fc2"].shape == (3, 10)
    assert out["loss"].value.shape == ()
    with pytest.raises(ValueError, match="too small"):
        lenet((1, 3, 3))


def test_lr_decay_scales_each_epoch_and_the_config_keeps_the_base_rate():
    from distconv.sync import create_sync

    train_set = synthetic(n=128)
    set_seed(0)
    net = lenet(train_set.image_shape, train_set.num_classes)
    opt = create_optimizer("sgd", lr=0.1)
    trainer = Trainer(net, create_sync("local", optimizer=opt), lr_decay=0.5, progress=False)
    seen = []
    for _ in range(3):
        trainer.train_epoch(train_set, 64)
        seen.append(opt.lr)
        trainer.epoch += 1
    assert seen == pytest.approx([0.1, 0.05, 0.025])
    assert opt.config()["lr"] == 0.1
    with pytest.raises(ValueError, match=r"lr_decay must lie in \(0, 1\]"):
        Trainer(net, create_sync("local", optimizer=opt), lr_decay=1.5)
