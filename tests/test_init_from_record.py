"""Where a run's first weights came from (``init_from``) stays in its checkpoints through any
resume: also one by a script's Trainer with no ``checkpoints`` hook (a plain
:class:`~distconv.resume.StepCheckpoints`), which knows nothing of the source; a fresh run
over it records none."""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.checkpoint import load_checkpoint
from distconv.init_from import INIT_FROM
from distconv.job import TrainConfig, train
from tests.hand_built_trainer import hand_built_trainer
from tests.test_init_from import FINE_LR, SETTINGS, first_run, newest

pytestmark = pytest.mark.timeout(120)


def started_from_a_source(tmp_path: Path) -> tuple[Path, dict]:
    """``distconv train --init-from A --out B``: B, and the record its checkpoint keeps."""
    source = first_run(tmp_path / "a")
    out = tmp_path / "b"
    train(TrainConfig(**SETTINGS, out=str(out), init_from=str(source), lr=FINE_LR))
    return out, load_checkpoint(newest(out)).extra[INIT_FROM]


def test_a_plain_scripts_resume_keeps_the_record_in_its_next_checkpoints(tmp_path):
    out, recorded = started_from_a_source(tmp_path)
    trainer, train_set, test_set = hand_built_trainer(out)  # no checkpoints hook
    trainer.fit(train_set, test_set, 2, resume=True)
    last = load_checkpoint(newest(out))
    assert last.step == 48 and last.extra[INIT_FROM] == recorded


def test_a_fresh_run_after_a_resume_in_the_same_trainer_records_no_source(tmp_path):
    out, _ = started_from_a_source(tmp_path)
    trainer, train_set, test_set = hand_built_trainer(out)
    trainer.fit(train_set, test_set, 2, resume=True)
    trainer.fit(train_set, test_set, 1, resume="overwrite")  # another run, from random weights
    last = load_checkpoint(newest(out))
    assert last.step == 24 and INIT_FROM not in last.extra


def test_a_later_resume_replaces_what_an_earlier_one_carried():
    """A Trainer resuming one run, then another (a sweep over out_dirs' checkpoints), records
    the second's source, or none where it had none: never the first's."""
    from distconv.carried_facts import carry_on

    facts = {"seed": 0}
    carried = carry_on(facts, {}, {INIT_FROM: {"step": 24}, "sums": {}})
    assert facts == {"seed": 0, INIT_FROM: {"step": 24}}
    assert carry_on(facts, carried, {"sums": {}}) == {} and facts == {"seed": 0}
