"""What the tests of a rate changed between fits (``optimizer.set_base_lr``) share, on every
transport: the rates, a Trainer that may change the rate inside a fit, and the notebook's
fit, change, fit again."""

from __future__ import annotations

from pathlib import Path

from distconv.equivalence import model, training_data
from distconv.sync.base import SyncStrategy
from distconv.trainer import Trainer

#: the rate of the first fit, the one set before (or in) the second, and each epoch's decay
FIRST_LR, NEW_LR, DECAY = 0.05, 0.2, 0.5
#: the global batch of every step: 3 steps an epoch of the :data:`EXAMPLES`
GLOBAL_BATCH, EXAMPLES = 8, 24
#: where the first fit (one epoch) ends
FIRST_FIT_STEPS = EXAMPLES // GLOBAL_BATCH


class RateSetInFit(Trainer):
    """A Trainer that sets :data:`NEW_LR` at the step numbered :attr:`set_at` (None: never):
    before it (a script's ``train_step`` override, before ``super().train_step``, as it must),
    or where :attr:`in_forward`, in its forward (after the sync's ``start_step``: inside it)."""

    set_at: int | None = None
    in_forward = False

    def train_step(self, arrays, passes):
        if self.pos.step == self.set_at and not self.in_forward:
            self.sync.optimizer.set_base_lr(NEW_LR)
        return super().train_step(arrays, passes)

    def _forward(self, arrays, index):
        if self.pos.step == self.set_at and self.in_forward:
            self.sync.optimizer.set_base_lr(NEW_LR)
        return super()._forward(arrays, index)


def lenet_trainer(sync: SyncStrategy, out_dir: Path | None = None) -> RateSetInFit:
    """The equivalence tests' small float64 LeNet under :data:`DECAY`, each rank's share of
    :data:`GLOBAL_BATCH` a pass."""
    return RateSetInFit(
        model(0, (2, 3)),
        sync,
        GLOBAL_BATCH // sync.world_size,
        out_dir=out_dir,
        progress=False,
        dtype="float64",
        lr_decay=DECAY,
    )


def lr_data() -> dict:
    """The rate tests' training set (named apart from conftest's ``data`` fixture, which a plain
    ``data`` imported here would shadow in a test module without a word)."""
    return training_data(EXAMPLES, 3)


def fit_twice(sync: SyncStrategy, sets: str, trainer: RateSetInFit | None = None) -> Trainer:
    """A notebook's two fits, in memory: one epoch, then one more (``resume=True``), the rate
    set (``sets``) ``"between"`` them, ``"in_fit"`` (before the second fit's second step),
    ``"in_forward"`` (in that step's forward) or ``"no"`` where. ``trainer``: the one to fit
    (made by :func:`lenet_trainer` on ``sync`` where None), for a caller that reads it after a
    refusal."""
    trainer = trainer or lenet_trainer(sync)
    trainer.fit(lr_data(), epochs=1)
    if sets == "between":
        sync.optimizer.set_base_lr(NEW_LR)
    trainer.set_at = FIRST_FIT_STEPS + 1 if sets in ("in_fit", "in_forward") else None
    trainer.in_forward = sets == "in_forward"
    trainer.fit(lr_data(), epochs=2, resume=True)
    return trainer
