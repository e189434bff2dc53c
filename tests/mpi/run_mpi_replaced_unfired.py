"""mpiexec -n 2 python -m mpi4py run_mpi_replaced_unfired.py OUT OVERLAP: a gradient replaced
on a parameter that fired on the other rank only.

Two parameters in two buckets (``b``'s first). Both ranks fire ``b``; rank 1 fires ``a`` too,
while rank 0 replaces ``a``'s gradient (a new array) without firing it. Both call
``finish_step``: rank 0's raises (the optimizer would read its own array, not the sum of
``a``'s bucket). Rank 0 writes what it raised to ``OUT/finish0.txt`` and its values to
``OUT/finish0.npz``, then closes: cleanly, every collective of the step complete.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from distconv.sync.base import SyncError
from tests.mpi.common import bucket_params, bucket_sync, fire


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    params = bucket_params("ab")
    sync = bucket_sync(overlap=overlap, timeout=20)
    try:
        sync.setup(params, {})
        sync.start_step(1)
        fire(sync, params[1], 1.0)  # bucket 0 ('b') on both ranks
        if sync.rank == 1:
            fire(sync, params[0], 1.0)
        else:
            params[0].grad = np.ones(3)  # replaced, never fired here
        try:
            sync.finish_step()
            said = "ok"
        except SyncError as exc:
            said = f"{type(exc).__name__}: {exc}"
        if sync.rank == 0:
            (out / "finish0.txt").write_text(said)
            np.savez(out / "finish0.npz", **{p.name: p.value for p in params})
    finally:
        sync.close()


if __name__ == "__main__":
    main()
