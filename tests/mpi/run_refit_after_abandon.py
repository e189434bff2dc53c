"""mpiexec -n 2 python -m mpi4py run_refit_after_abandon.py OUT OVERLAP [log]: a second fit after a
step that every rank abandoned once its first bucket was on the wire, as the Trainer does it.

Two parameters in two buckets (``b``'s first: the layout starts in reverse network order). Each
rank fires ``b`` (its bucket goes on the wire), then abandons the step; then, as
``Trainer.fit`` does, zeroes every gradient *before* setting the sync up again, and trains one
step. Each rank writes its values after that step to ``OUT/values<rank>.npz``.

``log`` (run it under ``-rc thread_level=serialized``, with OVERLAP 1): every MPI call is
logged (:mod:`one_call_at_a_time`) and each rank writes ``OUT/calls<rank>.json``; the thread
waits for a request in ``MPI_Wait`` (``poll_seconds=0``), and rank 1 fires a second late, so
rank 0's thread is inside that wait while rank 0's main thread sets the sync up again.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from one_call_at_a_time import OneCallAtATime  # noqa: E402

from distconv.optim import create_optimizer  # noqa: E402
from distconv.parameter import Parameter  # noqa: E402
from distconv.sync.mpi import MPISync, import_mpi  # noqa: E402
from tests.mpi.common import step_and_save  # noqa: E402


def main() -> None:
    out, overlap, log = Path(sys.argv[1]), sys.argv[2] == "1", sys.argv[3:] == ["log"]
    comm = OneCallAtATime(import_mpi().COMM_WORLD) if log else None
    sync = MPISync(
        create_optimizer("sgd", lr=0.5),
        comm=comm,
        bucket_bytes=24,
        overlap=overlap,
        timeout=60,
        poll_seconds=0 if log else None,
    )
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("ab")]
    try:
        sync.setup(params, {})
        sync.start_step(1)
        if log and sync.rank == 1:
            time.sleep(1.0)
        params[1].grad += 100.0
        params[1].inc_update(sync)
        sync.abandon_step()  # as the Trainer does when a layer raises mid-backward
        for p in params:  # Trainer.fit: network.zero_grad() before sync.setup
            p.zero_grad()
        sync.setup(params, {})
        step_and_save(sync, params, out)
        if log:
            calls = {"overlaps": comm.log.overlaps, "by_thread": comm.log.by_thread}
            (out / f"calls{sync.rank}.json").write_text(json.dumps(calls))
    finally:
        sync.close()


if __name__ == "__main__":
    main()
