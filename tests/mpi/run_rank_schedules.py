"""mpiexec -n 2 python -m mpi4py run_rank_schedules.py OUT MODE OVERLAP: the Trainer over MPI
with a per-step schedule of a script's own (``train_step`` sets ``set_lr_scale`` before each
step), with (OVERLAP 1) or without (0) the communication thread.

``skew``: rank r's factor is the schedule's times ``1 + r`` (it reads a rank-local value);
each rank writes what ``fit`` raised to ``OUT/rank<r>.err``, then raises it (``run_main``
ends it as a script's own would). ``same``: every rank sets the same factors, over
``--lr-decay`` per epoch (:data:`JOB`), accumulated passes, an evaluation between two steps
and one between epochs;
``hook``: the same, through a ``grad_hook`` that leaves the sums as they are. Rank r saves its
parameters to ``OUT/rank<r>.npz``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import small_lenet, trainer_data, weights  # noqa: E402

from distconv.distributed import run_main  # noqa: E402
from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402
from distconv.trainer import Trainer  # noqa: E402

#: the Trainer's settings of every run here, and of the one process the test compares with
JOB = {"progress": False, "dtype": "float64", "lr_decay": 0.7, "accumulate": 2}


def factor(step: int) -> float:
    """A per-step cosine, computed alike by every rank."""
    return 0.5 * (1 + math.cos(math.pi * step / 9))


class Scheduled(Trainer):
    """A Trainer that sets its factor before each step (times the epoch's decay, as
    ``--lr-decay`` scales it); ``skew``: times ``1 + rank``."""

    skew = False

    def train_step(self, arrays, passes):
        if self.pos.step == 2:  # an evaluation between steps: a meeting, at no rate
            self.evaluate(trainer_data(12, seed=5))
        own = 1 + self.sync.rank if self.skew else 1
        self.sync.set_lr_scale(self.lr_decay**self.pos.epoch * factor(self.pos.step) * own)
        return super().train_step(arrays, passes)


def main() -> None:
    out, mode, overlap = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    net = small_lenet(seed=0)
    hook = (lambda params, examples: None) if mode == "hook" else None
    optimizer = create_optimizer("adam", lr=0.01)
    sync = MPISync(optimizer, bucket_bytes=300, overlap=overlap, grad_hook=hook)
    Scheduled.skew = mode == "skew"
    try:
        trainer = Scheduled(net, sync, 4, **JOB)
        trainer.fit(trainer_data(40), trainer_data(12, seed=5), epochs=2)
    except Exception as error:
        (out / f"rank{sync.rank}.err").write_text(f"{type(error).__name__}: {error}\n")
        raise
    finally:
        sync.close()
    np.savez(out / f"rank{sync.rank}.npz", **weights(net))


if __name__ == "__main__":
    run_main(main)
