"""``distconv train --help`` says what the flags do: each statement checked against a run."""

from __future__ import annotations

import distconv.distributed as dist
from distconv.data import split, synthetic
from distconv.init import set_seed
from distconv.models import lenet
from distconv.train_args import train_parser
from distconv.trainer import Trainer


def _help(flag: str) -> str:
    """The help text of ``flag``, on one line."""
    action = next(a for a in train_parser()._actions if flag in a.option_strings)
    return " ".join(action.help.split())


def _fit(epochs: int, **kw):
    """A small Trainer fit with SGD at lr 1 on a local sync; returns (trainer, sync)."""
    data = split(synthetic(n=96, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)
    set_seed(0)
    sync = dist.init("sgd", lr=1.0)
    net = lenet((1, 8, 8), num_classes=4, channels=(4, 8), hidden=16)
    trainer = Trainer(net, sync, progress=False, **kw)
    trainer.fit(*data, epochs=epochs)
    return trainer, sync


def test_lr_decay_help_numbers_epochs_as_the_log_does():
    """The help said "epoch e trains at lr * LR_DECAY**e", but the log and metrics.jsonl call
    the first epoch 1, and it trains at lr itself: LR_DECAY**(e-1)."""
    assert "LR_DECAY**(e-1)" in _help("--lr-decay")
    trainer, sync = _fit(2, batch_size=16, lr_decay=0.5)
    try:
        assert [r["epoch"] for r in trainer.history] == [1, 2]
        assert sync.optimizer.lr == 1.0 * 0.5 ** (2 - 1)  # the rate epoch 2 trained at
    finally:
        sync.close()
    trainer, sync = _fit(1, batch_size=16, lr_decay=0.5)
    try:
        assert sync.optimizer.lr == 1.0  # epoch 1 trains at lr, not lr * 0.5
    finally:
        sync.close()


def test_batch_size_help_counts_a_pass_not_a_step():
    """The help said --batch-size was the "examples per step on each worker"; with
    --accumulate K a step takes K passes of that many, K times as many examples."""
    text = _help("--batch-size")
    assert "per forward/backward pass" in text and "--accumulate" in text
    trainer, sync = _fit(1, batch_size=8, accumulate=2)
    try:
        assert trainer.history[-1]["global_batch"] == 8 * 2  # one worker: a step's examples
    finally:
        sync.close()
