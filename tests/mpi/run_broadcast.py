"""mpiexec -n 2 python -m mpi4py run_broadcast.py CASE RECORDS: rank 0's parameters broadcast
between steps, after two steps in which rank 0 set its own to 0.5 (a checkpoint of its own,
say).

- ``all``: every rank calls ``broadcast_parameters``, then trains a third step; each rank writes
  its parameters before and after that step to ``RECORDS/rank<r>.npz``.
- ``alone``: rank 0 alone calls it, then trains on with rank 1, which must not go on with other
  parameters than rank 0's: the job stops naming what each rank was doing.

Each rank's stderr and log go to ``RECORDS/rank<r>.err`` (as in ``run_stall.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from common import global_batches, one_step, small_lenet, weights  # noqa: E402
from run_stall import record_to  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.sync.mpi import MPISync  # noqa: E402


def main() -> None:
    case, records = sys.argv[1], Path(sys.argv[2])
    sync = MPISync(create_optimizer("sgd"), overlap=False)
    record_to(records, sync.rank)
    net = small_lenet(seed=0)
    rank, world = sync.rank, sync.world_size
    saved = {}
    try:
        sync.setup(net.parameters(), {})
        for step, (x, y) in enumerate(global_batches()):
            if step == 2:
                if rank == 0:
                    for p in net.parameters():
                        p.value[...] = 0.5
                if rank == 0 or case == "all":
                    sync.broadcast_parameters()
                saved = {f"before/{k}": v for k, v in weights(net).items()}
            one_step(net, sync, x[rank::world], y[rank::world])
            if step == 2:
                break
        np.savez(records / f"rank{rank}.npz", **saved, **weights(net))
    finally:
        sync.close()


if __name__ == "__main__":
    main()
