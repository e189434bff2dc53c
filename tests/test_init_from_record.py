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
from tests.test_init_from import FINE_LR, SETTINGS, first_run, newest

pytestmark = pytest.mark.timeout(120)


def plain_trainer(out: Path):
    """``distconv train``'s job built by a script without the ``checkpoints`` hook; its sets."""
    from distconv.data import load_dataset
    from distconv.init import set_seed
    from distconv.models import lenet
    from distconv.optim import create_optimizer
    from distconv.sync.local import LocalSync
    from distconv.trainer import Trainer

    train_set, test_set = load_dataset("synthetic", None, 0)
    set_seed(0)
    network = lenet(train_set.image_shape, train_set.num_classes)
    trainer = Trainer(
        network, LocalSync(create_optimizer("adam", lr=FINE_LR)), 16, seed=0, lr_decay=0.9,
        dtype="float64", out_dir=out, progress=False,
        config={"data": "synthetic", "model": "lenet", "epochs": 1},
    )  # fmt: skip
    return trainer, train_set, test_set


def started_from_a_source(tmp_path: Path) -> tuple[Path, dict]:
    """``distconv train --init-from A --out B``: B, and the record its checkpoint keeps."""
    source = first_run(tmp_path / "a")
    out = tmp_path / "b"
    train(TrainConfig(**SETTINGS, out=str(out), init_from=str(source), lr=FINE_LR))
    return out, load_checkpoint(newest(out)).extra[INIT_FROM]


def test_a_plain_scripts_resume_keeps_the_record_in_its_next_checkpoints(tmp_path):
    out, recorded = started_from_a_source(tmp_path)
    trainer, train_set, test_set = plain_trainer(out)
    trainer.fit(train_set, test_set, 2, resume=True)
    last = load_checkpoint(newest(out))
    assert last.step == 48 and last.extra[INIT_FROM] == recorded


def test_a_fresh_run_after_a_resume_in_the_same_trainer_records_no_source(tmp_path):
    out, _ = started_from_a_source(tmp_path)
    trainer, train_set, test_set = plain_trainer(out)
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
