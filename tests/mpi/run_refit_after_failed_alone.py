"""mpiexec -n 2 python -m mpi4py run_refit_after_failed_alone.py OUT OVERLAP: rank 0's
``finish_step`` of step 0 fails on rank 0 alone (a gradient replaced after it fired), rank 1's
succeeds. Each rank then tries a step (rank 0's ``start_step`` is refused and tells rank 1,
whose step check refuses it), abandons it, and sets up again, as a second fit does; then one
last step (:func:`~tests.mpi.common.refit_and_save`: ``OUT/values<rank>.npz``). A rank that
fails writes ``OUT/rank<r>.err``.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from distconv.sync.base import SyncError
from tests.mpi.common import (
    bucket_params,
    bucket_sync,
    finish_failed_on_rank_0,
    fire,
    recorded,
    refit_and_save,
)


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    sync, params = bucket_sync(overlap=overlap, timeout=20), bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        finish_failed_on_rank_0(sync, params)
        with contextlib.suppress(SyncError):  # refused: on rank 1 at its first gradient
            sync.start_step(1)
            fire(sync, params[-1], 1.0)
        sync.abandon_step()
        refit_and_save(sync, params, out)


if __name__ == "__main__":
    main()
