"""mpiexec -n 2 python -m mpi4py run_refused_wire_abandoned.py OUT OVERLAP DTYPE: a second fit
after a step that rank 1 abandoned before any gradient fired while rank 0 finished it.

Two parameters in two buckets (``b``'s first). Rank 0 fires ``b`` (1e6 on a ``float16`` wire:
past its range, refused) and calls ``finish_step``; rank 1 raises before any gradient and
abandons the step. Both set the sync up again, as ``Trainer.fit`` does: rank 0 finished one
step, rank 1 none, and setup's check refuses it. Rank 0 writes its ``finish_step``'s error to
``OUT/error0.txt``; each rank its second setup's seconds and error to ``OUT/setup<rank>.txt``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync


def main() -> None:
    out, overlap, dtype = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
    grad_dtype = None if dtype == "native" else dtype
    sync = MPISync(
        create_optimizer("sgd", lr=0.5),
        bucket_bytes=24,
        grad_dtype=grad_dtype,
        overlap=overlap,
        timeout=20,
    )
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("ab")]
    try:
        sync.setup(params, {})
        sync.start_step(1)
        if sync.rank == 0:
            with np.errstate(over="ignore"):
                params[1].grad += 1e6
                params[1].inc_update(sync)
                try:
                    sync.finish_step()
                except SyncError as exc:
                    (out / "error0.txt").write_text(str(exc))
        sync.abandon_step()  # rank 1's layer raised before any gradient (rank 0: no-op)
        for p in params:
            p.zero_grad()
        began = time.perf_counter()
        try:
            sync.setup(params, {})
        except SyncError as exc:  # one rank counts the step, the other does not
            seconds = time.perf_counter() - began
            (out / f"setup{sync.rank}.txt").write_text(f"{seconds:.3f} {exc}\n")
            raise
    finally:
        sync.close()


if __name__ == "__main__":
    main()
