"""mpiexec -n 2 python -m mpi4py run_abandon_pending_overflow.py OUT: a second fit after a step
abandoned once its first float16 bucket had overflowed on the wire, with the thread.

Two parameters in two buckets (``b``'s first). Both ranks fire ``b`` with a gradient past
float16's range, so its wire holds infinity and each rank's communication thread refuses it,
skipping every reduction after it. Rank 1 polls gently (1 s) and abandons at once, so its
second setup hands ``a`` over while its thread still waits in ``b``; rank 0 waits in MPI and
abandons after its thread refused ``b``. Both zero their gradients, set the sync up again and
train one step; each rank writes the seconds its second setup took to ``OUT/setup<rank>.txt``
and its values after that step to ``OUT/values<rank>.npz``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync
from tests.mpi.common import step_and_save


def main() -> None:
    out, rank = Path(sys.argv[1]), MPI.COMM_WORLD.Get_rank()
    sync = MPISync(
        create_optimizer("sgd", lr=0.5),
        bucket_bytes=24,
        grad_dtype="float16",
        overlap=True,
        poll_seconds=1.0 if rank == 1 else 0.0,
        timeout=60,
    )
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("ab")]
    try:
        sync.setup(params, {})
        sync.start_step(1)
        with np.errstate(over="ignore"):
            params[1].grad += 1e6  # 5e5 on the wire: infinity in float16
            params[1].inc_update(sync)
        if rank == 0:
            time.sleep(3.0)  # its thread has refused b by now
        sync.abandon_step()
        for p in params:
            p.zero_grad()
        began = time.perf_counter()
        sync.setup(params, {})
        (out / f"setup{rank}.txt").write_text(f"{time.perf_counter() - began:.3f}\n")
        step_and_save(sync, params, out)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
