"""mpiexec -n 2 python -m mpi4py run_refused_check_wait.py OUT OVERLAP SLEEP: rank 1 sleeps
``SLEEP`` seconds before it starts step 0, which the step check refuses on every rank in
``finish_step`` (rank 0 claims another firing order, so its buckets are laid out the other way
round; no gradient fires, so nothing goes during backward). Each rank writes
``OUT/wait<rank>.json`` (what its ``finish_step`` raised, its ``traffic()["sync_seconds"]`` and
the wall time from its ``start_step`` to the refusal), then closes its sync
(:func:`~tests.mpi.common.recorded`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.mpi.common import bucket_params, bucket_sync, recorded
from tests.mpi.run_check_interrupt import what_raises


def main() -> None:
    out, overlap, sleep = Path(sys.argv[1]), sys.argv[2] == "1", float(sys.argv[3])
    sync, params = bucket_sync(overlap=overlap, timeout=30), bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        if sync.rank == 0:  # setup laid them out last to first, as backward fires them
            sync.set_firing_order([p.name for p in params])
        else:
            time.sleep(sleep)
        began = time.perf_counter()
        sync.start_step(1)
        said = what_raises(sync.finish_step)
        step_seconds = time.perf_counter() - began
        waited = {"said": said, "sync_seconds": sync.traffic()["sync_seconds"]}
        waited["step_seconds"] = step_seconds
        (out / f"wait{sync.rank}.json").write_text(json.dumps(waited))


if __name__ == "__main__":
    main()
