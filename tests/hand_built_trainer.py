"""``distconv train``'s job built by hand, as a script builds it: synthetic data, LeNet, Adam at
the init-from tests' fine-tuning rate, float64, one epoch in its config. The init-from tests
drive it with and without a ``checkpoints`` hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distconv.data import load_dataset
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.test_init_from import FINE_LR


def hand_built_trainer(out: Path, **settings: Any) -> tuple[Trainer, Any, Any]:
    """The job's Trainer writing to ``out`` (``settings``: any other of its arguments, as
    ``checkpoints``), and its train and test sets."""
    train_set, test_set = load_dataset("synthetic", None, 0)
    set_seed(0)
    network = lenet(train_set.image_shape, train_set.num_classes)
    trainer = Trainer(
        network, LocalSync(create_optimizer("adam", lr=FINE_LR)), 16, seed=0, lr_decay=0.9,
        dtype="float64", out_dir=out, progress=False,
        config={"data": "synthetic", "model": "lenet", "epochs": 1}, **settings,
    )  # fmt: skip
    return trainer, train_set, test_set
