"""mpiexec -n 2 python -m mpi4py run_rank_schedules.py OUT MODE: the Trainer over MPI with a
per-step schedule of a script's own (``train_step`` sets ``set_lr_scale`` before each step).

``skew``: rank r's factor is the schedule's times ``1 + r`` (it reads a rank-local value);
each rank writes what ``fit`` raised to ``OUT/rank<r>.err``, then raises it. ``same``: every
rank sets the same factors; rank r saves its parameters to ``OUT/rank<r>.npz``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import small_lenet, trainer_data, weights  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402
from distconv.trainer import Trainer  # noqa: E402


def factor(step: int) -> float:
    """A per-step cosine, computed alike by every rank."""
    return 0.5 * (1 + math.cos(math.pi * step / 9))


class Scheduled(Trainer):
    """A Trainer that sets its factor before each step; ``skew``: times ``1 + rank``."""

    skew = False

    def train_step(self, arrays, passes):
        own = 1 + self.sync.rank if self.skew else 1
        self.sync.set_lr_scale(factor(self.pos.step) * own)
        return super().train_step(arrays, passes)


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    net = small_lenet(seed=0)
    sync = MPISync(create_optimizer("adam", lr=0.01), bucket_bytes=300)
    Scheduled.skew = mode == "skew"
    try:
        trainer = Scheduled(net, sync, 4, progress=False, dtype="float64")
        trainer.fit(trainer_data(40), epochs=2)
    except Exception as error:
        (out / f"rank{sync.rank}.err").write_text(f"{type(error).__name__}: {error}\n")
        raise
    finally:
        sync.close()
    np.savez(out / f"rank{sync.rank}.npz", **weights(net))


if __name__ == "__main__":
    main()
