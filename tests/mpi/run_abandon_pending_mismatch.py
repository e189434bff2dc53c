"""mpiexec -n 2 python -m mpi4py run_abandon_pending_mismatch.py OUT OVERLAP WHEN: a second
setup after a step whose ranks laid their buckets out differently, so that no rank sent a piece.

Four parameters of 1, 2, 1 and 2 values in buckets of 24 bytes: rank 0 lays them out as
``abcd`` (two buckets), rank 1 as ``acbd`` (three). WHEN ``step``: each rank fires its first
bucket, and the step's check refuses it on both (the error goes to ``OUT/error<rank>.txt``);
``setup``: each fires ``a`` alone, and the check is still pending at the second setup. Both
abandon the step and set the sync up again, then close it; each rank writes ``done`` to
``OUT/done<rank>.txt`` once closed. What the abandoned step left must not be sent: rank 1's
third allreduce would wait for ever (here: until the watchdog ends the job).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync


def main() -> None:
    out, overlap, during = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "step"
    sync = MPISync(create_optimizer("sgd"), bucket_bytes=24, overlap=overlap, timeout=20)
    params = [Parameter(n, np.zeros(k)) for n, k in zip("abcd", (1, 2, 1, 2))]
    try:
        sync.setup(params, {})
        sync.set_firing_order("abcd" if sync.rank == 0 else "acbd")
        sync.start_step(1)
        try:
            for name in sync.firing_order[:2] if during else "a":
                param = next(p for p in params if p.name == name)
                param.grad += 1.0
                param.inc_update(sync)
        except SyncError as error:
            (out / f"error{sync.rank}.txt").write_text(f"{error}\n")
        sync.abandon_step()
        for p in params:
            p.zero_grad()
        sync.setup(params, {})
    finally:
        sync.close()
    (out / f"done{sync.rank}.txt").write_text("done\n")


if __name__ == "__main__":
    main()
