"""mpiexec -n 2 python -m mpi4py run_abandon_pending_uneven.py OUT OVERLAP: a second fit after
a step the ranks abandoned at different points, so that one rank's allreduce is never matched.

Two parameters in two buckets (``b``'s first). Rank 0 fires ``b``, so its bucket goes on the
wire (or to the communication thread, which waits for it); rank 1 raises before any gradient
fires. Both abandon the step, zero their gradients and set the sync up again, as
``Trainer.fit`` does, and train one step; each rank writes its values after that step to
``OUT/values<rank>.npz``, the seconds its second setup took to ``OUT/setup<rank>.txt``, and
whether the abandoned step's allreduce was still pending after it to ``OUT/pending<rank>.txt``
(without the thread, the request on the wire is the step's pump's).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.mpi.common import bucket_params, bucket_sync, fire, step_and_save


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    sync = bucket_sync(overlap=overlap, timeout=60)
    params = bucket_params()
    try:
        sync.setup(params, {})
        sync.start_step(1)
        if sync.rank == 0:
            fire(sync, params[1], 100.0)
        wire = sync._pump  # the abandoned step's: its request is the piece on the wire
        sync.abandon_step()  # rank 1's layer raised before any gradient
        for p in params:
            p.zero_grad()
        began = time.perf_counter()
        sync.setup(params, {})
        (out / f"setup{sync.rank}.txt").write_text(f"{time.perf_counter() - began:.3f}\n")
        (out / f"pending{sync.rank}.txt").write_text(f"{wire.request is not None}\n")
        step_and_save(sync, params, out)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
