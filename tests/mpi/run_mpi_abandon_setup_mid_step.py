"""mpiexec -n 2 python -m mpi4py run_mpi_abandon_setup_mid_step.py OUT OVERLAP: a second
``setup`` while a step is still open (neither finished nor abandoned).

Two parameters in two buckets (``b``'s first). Each rank fires ``b`` (its bucket goes on the
wire), then, without ``finish_step`` or ``abandon_step``, zeroes every gradient and sets the
sync up again (a caller that caught an error and fitted again), then trains one step
(:func:`~tests.mpi.common.step_and_save`): ``OUT/values<rank>.npz``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.mpi.common import bucket_params, bucket_sync, open_step, refit_and_save


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    sync = bucket_sync(overlap=overlap, timeout=20)
    params = bucket_params()
    try:
        open_step(sync, params, 100.0)
        refit_and_save(sync, params, out)  # no abandon_step: the step is still open
    finally:
        sync.close()


if __name__ == "__main__":
    main()
