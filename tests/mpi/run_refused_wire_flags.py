"""mpiexec -n 2 python -m mpi4py run_refused_wire_flags.py OUT WHERE: a second fit after a
``finish_step`` whose float16 wire was refused on the communication thread, after or before
the used-parameter flags' exchange started there.

Two parameters in two buckets (``b``'s first). WHERE ``last``: both ranks fire ``b`` and leave
``a``, past float16's range, unfired, so ``a`` goes at ``finish_step``, after the flags' start,
and is refused. ``uneven``: rank 0 fires ``b``, past the range, during the step (before the
flags' start in its thread's queue); rank 1 leaves it unfired (after). Every rank then catches
the SyncError, abandons the step, zeroes its gradients, sets the sync up again and trains one
step. Each rank writes to ``OUT/rank<rank>.txt`` whether the failed step's flags were started
and completed by that setup, and its seconds, and to ``OUT/values<rank>.npz`` its values before
the second setup and after the step.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from mpi4py import MPI

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync
from tests.mpi.common import last_step


def main() -> None:
    out, uneven = Path(sys.argv[1]), sys.argv[2] == "uneven"
    rank = MPI.COMM_WORLD.Get_rank()
    sync = MPISync(
        create_optimizer("sgd", lr=0.5),
        bucket_bytes=24,
        grad_dtype="float16",
        overlap=True,
        timeout=20,
    )
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("ab")]
    a, b = params
    try:
        sync.setup(params, {})
        sync.start_step(1)
        with np.errstate(over="ignore"):
            b.grad += 1e6 if uneven else 1.0
            if not (uneven and rank == 1):
                b.inc_update(sync)
            a.grad += 1.0 if uneven else 1e6  # unfired: it goes with finish_step
            try:
                sync.finish_step()
            except SyncError:
                sync.abandon_step()  # as Trainer.fit does
        before = {p.name: p.value.copy() for p in params}
        for p in params:
            p.zero_grad()
        started, began = sync._used._request, time.perf_counter()  # the failed step's
        sync.setup(params, {})
        seconds = time.perf_counter() - began
        completed = started is not None and started._request == MPI.REQUEST_NULL  # Wait nulls it
        (out / f"rank{rank}.txt").write_text(f"{completed} {seconds:.3f}\n")
        last_step(sync, params)
        after = {f"{p.name}_after": p.value for p in params}
        np.savez(out / f"values{rank}.npz", **before, **after)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
