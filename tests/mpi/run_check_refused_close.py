"""mpiexec -n 2 python -m mpi4py run_check_refused_close.py OUT OVERLAP: the step check refuses
step 0 on every rank in ``finish_step`` (rank 0 claims another firing order, so its buckets are
laid out the other way round; no gradient fires, so nothing goes during backward). Each rank
writes what its step raised to ``OUT/said<rank>.txt``, then closes its sync
(:func:`~tests.mpi.common.recorded`): a close that aborts ends the job with a status not 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.mpi.common import bucket_params, bucket_sync, recorded
from tests.mpi.run_check_interrupt import what_raises


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    sync, params = bucket_sync(overlap=overlap, timeout=3), bucket_params()
    with recorded(sync, out):
        sync.setup(params, {})
        if sync.rank == 0:  # setup laid them out last to first, as backward fires them
            sync.set_firing_order([p.name for p in params])
        sync.start_step(1)
        (out / f"said{sync.rank}.txt").write_text(what_raises(sync.finish_step))


if __name__ == "__main__":
    main()
