"""A script's Trainer starts from a checkpoint's weights as ``distconv train --init-from`` does,
through its ``checkpoints`` hook (``partial(InitFromCheckpoints, source=PATH)``): the same
weights as the command line's run, the source recorded; resumed, its own checkpoint wins and
the record is kept."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import load_checkpoint
from distconv.init_from import INIT_FROM, InitFromCheckpoints
from distconv.job import TrainConfig, train
from tests.hand_built_trainer import hand_built_trainer
from tests.test_init_from import FINE_LR, SETTINGS, first_run, newest, weights

pytestmark = pytest.mark.timeout(120)


def script_trainer(out: Path, source: Path | None):
    """``distconv train``'s job built by hand, at :data:`FINE_LR`, its checkpoints made by the
    hook from ``source``; and its data sets."""
    return hand_built_trainer(out, checkpoints=partial(InitFromCheckpoints, source=source))


def test_a_scripts_trainer_starts_from_the_source_as_the_command_line_does(tmp_path):
    source = first_run(tmp_path / "a")
    train(TrainConfig(**SETTINGS, out=str(tmp_path / "cli"), init_from=str(source), lr=FINE_LR))
    trainer, train_set, test_set = script_trainer(tmp_path / "script", source)
    trainer.fit(train_set, test_set, 1)
    ours, cli = load_checkpoint(newest(tmp_path / "script")), newest(tmp_path / "cli")
    assert ours.step == 24 and ours.extra[INIT_FROM]["path"] == str(source.absolute())
    for name, value in weights(cli).items():
        assert np.array_equal(ours.params[name], value), name


def test_a_scripts_resume_wins_over_the_source_and_keeps_its_record(tmp_path):
    source = first_run(tmp_path / "a")
    train(TrainConfig(**SETTINGS, out=str(tmp_path / "b"), init_from=str(source), lr=FINE_LR))
    recorded = load_checkpoint(newest(tmp_path / "b")).extra[INIT_FROM]
    source.unlink()  # a resume reads only its own run: the source may be gone
    trainer, train_set, test_set = script_trainer(tmp_path / "b", source)
    trainer.fit(train_set, test_set, 2, resume="auto")
    assert [r["epoch"] for r in trainer.history] == [2]
    last = load_checkpoint(newest(tmp_path / "b"))
    assert last.step == 48 and last.extra[INIT_FROM] == recorded
