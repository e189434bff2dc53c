"""mpiexec -n 2 python -m mpi4py run_stalled_rank.py RUN_DIR STALL: the Trainer over MPI for
one epoch of 12 steps into ``RUN_DIR``, rank 1 stalled ``STALL`` seconds before its step
:data:`~tests.stalled_step.STALLED_STEP`; each rank logs its epoch line on stderr."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import small_lenet, trainer_data  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402
from distconv.trainer import Trainer  # noqa: E402
from tests.stalled_step import StalledTrainer  # noqa: E402


def main() -> None:
    run_dir, stall = sys.argv[1], float(sys.argv[2])
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sync = MPISync(create_optimizer("sgd", lr=0.01))
    try:
        kind = StalledTrainer if sync.rank == 1 else Trainer
        trainer = kind(small_lenet(seed=0), sync, 2, progress=False, out_dir=run_dir)
        trainer.stall = stall
        trainer.fit(trainer_data(48), epochs=1)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
