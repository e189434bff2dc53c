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

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync
from tests.mpi.common import step_and_save


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    sync = MPISync(create_optimizer("sgd", lr=0.5), bucket_bytes=24, overlap=overlap, timeout=20)
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("ab")]
    try:
        sync.setup(params, {})
        sync.start_step(1)
        params[1].grad += 100.0
        params[1].inc_update(sync)
        for p in params:  # no abandon_step: the step is still open
            p.zero_grad()
        sync.setup(params, {})
        step_and_save(sync, params, out)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
