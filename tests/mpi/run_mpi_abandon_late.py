"""mpiexec -n 2 python -m mpi4py run_mpi_abandon_late.py OUT DELAY TIMEOUT: every rank abandons
the same step, rank 1 ``DELAY`` seconds after rank 0 (a layer that raises late in a long pass,
a rank on a loaded machine), then both fit again.

Two parameters in two buckets (``b``'s first), the communication thread on, the watchdog's
``timeout`` ``TIMEOUT`` seconds. Both fire ``b`` (its bucket goes on the wire); rank 0 abandons
at once and sets the sync up again: its thread sends what the step left (bucket ``a``) and
waits there for rank 1, which abandons and sets up ``DELAY`` seconds later. Both then train one step
(:func:`~tests.mpi.common.step_and_save`): ``OUT/values<rank>.npz``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.mpi.common import bucket_params, bucket_sync, open_step, refit_and_save


def main() -> None:
    out, delay, timeout = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    sync = bucket_sync(overlap=True, timeout=timeout)
    params = bucket_params()
    try:
        open_step(sync, params, 100.0)
        if sync.rank == 1:
            time.sleep(delay)  # still in its pass, alive, well inside the timeout
        sync.abandon_step()
        refit_and_save(sync, params, out)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
