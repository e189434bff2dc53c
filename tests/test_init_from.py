"""``distconv train --init-from PATH``: a new run (step 0, fresh optimizer state and schedule)
from the weights of another run's checkpoint. It equals a script that restores them into a
fresh model and trains; it records where they came from; a run of its own in --out wins; a
model they do not fit is refused naming the first parameter that differs."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import DIGEST_KEY, CheckpointError, load_checkpoint, restore_checkpoint
from distconv.job import TrainConfig, train

pytestmark = pytest.mark.timeout(120)

#: the runs' settings: float64, so that two equal computations end on equal bits
SETTINGS = {"data": "synthetic", "dtype": "float64", "epochs": 1, "progress": False}
FINE_LR = 0.0005


def first_run(out: Path, **changes) -> Path:
    """Train one epoch into ``out``; its newest checkpoint's file."""
    train(TrainConfig(**{**SETTINGS, **changes}, out=str(out)))
    return newest(out)


def newest(out: Path) -> Path:
    """The chief's part of the newest step checkpoint in ``out``."""
    return sorted((out / "checkpoints").glob("step-*/chief.safetensors"))[-1]


def weights(file: Path) -> dict[str, np.ndarray]:
    return load_checkpoint(file).params


def script_reference(source: Path, lr: float, out: Path) -> dict[str, np.ndarray]:
    """What a script does without --init-from: build the job's model as ``distconv train``
    does, restore ``source``'s weights into it, train one epoch at ``lr``."""
    from distconv.data import load_dataset
    from distconv.init import set_seed
    from distconv.models import lenet
    from distconv.optim import create_optimizer
    from distconv.sync.local import LocalSync
    from distconv.trainer import Trainer

    train_set, test_set = load_dataset("synthetic", None, 0)
    optimizer = create_optimizer("adam", lr=lr)
    set_seed(0)
    network = lenet(train_set.image_shape, train_set.num_classes)
    config = {"data": "synthetic", "model": "lenet", "epochs": 1}
    trainer = Trainer(
        network, LocalSync(optimizer), 16, seed=0, lr_decay=0.9, dtype="float64",
        out_dir=out, progress=False, config=config,
    )  # fmt: skip
    restore_checkpoint(source, network.parameters())
    trainer.fit(train_set, test_set, 1)
    return weights(newest(out))


def test_a_run_from_init_equals_a_script_that_restores_the_weights(tmp_path):
    source = first_run(tmp_path / "a")
    train(
        TrainConfig(**SETTINGS, out=str(tmp_path / "b"), init_from=str(tmp_path / "a"), lr=FINE_LR)
    )
    ours = weights(newest(tmp_path / "b"))
    theirs = script_reference(source, FINE_LR, tmp_path / "script")
    assert ours.keys() == theirs.keys()
    for name, value in theirs.items():
        assert np.array_equal(ours[name], value), name
    # and it trained from step 0 on: one epoch of 24 steps, not 24 more after A's 24
    assert load_checkpoint(newest(tmp_path / "b")).step == 24


def test_the_source_is_recorded_in_the_log_and_each_checkpoint_resumes_keep_it(tmp_path, caplog):
    source = first_run(tmp_path / "a")
    from safetensors import safe_open

    with safe_open(str(source), framework="np") as f:
        digest = f.metadata()[DIGEST_KEY]
    config = TrainConfig(**SETTINGS, out=str(tmp_path / "b"), init_from=str(source), lr=FINE_LR)
    with caplog.at_level(logging.INFO):
        train(config)
    said = caplog.text
    said_digest = f"(step 24, content digest {digest[:16]}): weights only"
    assert f"initialised from {source} {said_digest}" in said
    # the checkpoint's own digest of its metadata and tensors, not sha256sum's of the file
    assert digest != hashlib.sha256(source.read_bytes()).hexdigest()
    assert f"'init_from': '{source}'" in said  # the start line's config
    recorded = {"path": str(source.absolute()), "step": 24, "sha256": digest}
    assert load_checkpoint(newest(tmp_path / "b")).extra["init_from"] == recorded
    # a restart (resume auto, the same command) resumes the new run and keeps the record
    caplog.clear()
    with caplog.at_level(logging.INFO):
        trainer = train(TrainConfig(**{**vars(config), "epochs": 2, "resume": "auto"}))
    assert [r["epoch"] for r in trainer.history] == [2]  # not re-initialised: epoch 2 alone
    assert f"--init-from {source} not used: resuming this run's own checkpoint" in caplog.text
    last = load_checkpoint(newest(tmp_path / "b"))
    assert last.step == 48 and last.extra["init_from"] == recorded


@pytest.mark.parametrize("given", ["out", "step folder", "manifest"])
def test_each_way_of_naming_the_checkpoint_loads_the_same_weights(tmp_path, given):
    source = first_run(tmp_path / "a", checkpoint_every=5)  # several step checkpoints
    path = {
        "out": tmp_path / "a",
        "step folder": source.parent,
        "manifest": source.parent.with_suffix(".json"),
    }[given]
    train(TrainConfig(**SETTINGS, out=str(tmp_path / "b"), init_from=str(path)))
    assert load_checkpoint(newest(tmp_path / "b")).extra["init_from"]["path"] == str(
        source.absolute()
    )


def test_weights_of_another_model_are_refused_naming_the_first_difference(tmp_path):
    first_run(tmp_path / "a")  # synthetic: 4 classes; the digits have 10
    config = TrainConfig(**{**SETTINGS, "data": "digits"}, out=str(tmp_path / "b"))
    config.init_from = str(tmp_path / "a")
    with pytest.raises(CheckpointError) as refused:
        train(config)
    said = str(refused.value)
    first = "'fc2.weight': checkpoint shape (4, 128), this model (10, 128)"
    assert f"its weights do not fit this model (first difference: {first})" in said
    assert not (tmp_path / "b" / "checkpoints").exists() or not list(
        (tmp_path / "b" / "checkpoints").glob("*.json")
    )


def test_weights_of_another_dtype_are_cast_and_said(tmp_path, caplog):
    source = first_run(tmp_path / "a")
    config = TrainConfig(**{**SETTINGS, "dtype": "float32"}, out=str(tmp_path / "b"))
    config.init_from, config.epochs = str(source), 1
    with caplog.at_level(logging.WARNING):
        train(config)
    assert f"--init-from {source}: casting its float64 weights to this run's float32" in (
        caplog.text
    )
    assert all(a.dtype == np.float32 for a in weights(newest(tmp_path / "b")).values())


def test_overwrite_of_the_out_that_holds_the_source_is_refused_and_deletes_nothing(tmp_path):
    source = first_run(tmp_path / "a")
    before = source.read_bytes()
    config = TrainConfig(**SETTINGS, out=str(tmp_path / "a"), init_from=str(tmp_path / "a"))
    config.resume = "overwrite"
    with pytest.raises(CheckpointError, match="which --overwrite deletes: start the new run in "):
        train(config)
    assert source.read_bytes() == before


def test_the_out_that_holds_the_source_is_refused_saying_to_pass_another(tmp_path):
    """The default --out is named by data, optimizer and seed alone: a fine-tuning run with
    the source's lands in the source's run, whose refusal named only --resume and --overwrite
    (the first continues the source, the second would delete it). The launcher still reads it
    as refused for good."""
    from distconv.refused_starts import refused_for_good_in

    first_run(tmp_path / "a")
    config = TrainConfig(**SETTINGS, out=str(tmp_path / "a"), init_from=str(tmp_path / "a"))
    with pytest.raises(CheckpointError) as refused:
        train(config)
    said = str(refused.value)
    assert said.startswith(f"{tmp_path / 'a'} already holds a run; pass --resume to continue it")
    assert said.endswith("which lie in it, pass another --out (the default --out is named by "
                         "--data, --optimizer and --seed alone)")  # fmt: skip
    assert refused_for_good_in([f"distconv train: error: {said}"]) is not None


def test_resume_with_nothing_to_resume_is_refused_and_says_how_to_start_from_init(tmp_path):
    """--resume means the run's own checkpoint must exist, with --init-from too: a restart
    story that could silently start over is --resume auto's, which the refusal names."""
    source = first_run(tmp_path / "a")
    config = TrainConfig(**SETTINGS, out=str(tmp_path / "b"), init_from=str(source), resume=True)
    with pytest.raises(CheckpointError) as refused:
        train(config)
    assert str(refused.value).startswith("--resume: no complete checkpoint in ")
    assert "drop --resume, or pass --resume auto (a restart then resumes the new run)" in str(
        refused.value
    )
    config.resume = "auto"  # nothing to resume: the new run starts from the weights
    train(config)
    assert load_checkpoint(newest(tmp_path / "b")).extra["init_from"]["step"] == 24


def test_nothing_at_the_path_is_refused_naming_it(tmp_path):
    config = TrainConfig(**SETTINGS, out=str(tmp_path / "b"), init_from=str(tmp_path / "nope"))
    with pytest.raises(CheckpointError, match=r"--init-from .*nope: no such file or folder"):
        train(config)
    (tmp_path / "empty").mkdir()
    config.init_from = str(tmp_path / "empty")
    with pytest.raises(CheckpointError, match="no complete checkpoint there"):
        train(config)


def test_the_start_line_shows_the_learning_rate_and_sync_the_run_uses(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="distconv.job"):
        train(TrainConfig(**SETTINGS, out=str(tmp_path / "a")))
    (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("training on")]
    assert "'lr': 0.001," in line and "'sync': 'local'," in line, line
