"""``distconv train`` for ``distconv-launch local --servers M``, with rank 1 raising a
simulated out-of-memory error in its 6th step (after step 5): ``python ps_train_crash.py
OUT``."""

from __future__ import annotations

import sys

from distconv import trainer
from distconv.cli import main

_step = trainer.Trainer.train_step


def _failing_on_rank_1(self, *args):
    if self.sync.rank == 1 and self.pos.step == 5:
        raise MemoryError("out of memory in layer fc1 (simulated)")
    return _step(self, *args)


if __name__ == "__main__":
    trainer.Trainer.train_step = _failing_on_rank_1
    argv = ["train", "--data", "synthetic", "--batch-size", "8", "--epochs", "3"]
    sys.exit(main([*argv, "--no-progress", "--out", sys.argv[1]]))
