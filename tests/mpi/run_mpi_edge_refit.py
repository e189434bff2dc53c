"""mpiexec -n 2 python -m mpi4py run_mpi_edge_refit.py OUT OVERLAP: a second fit after a step
that every rank abandoned once its first bucket was on the wire, as the Trainer does it.

Two parameters in two buckets (``b``'s first: the layout starts in reverse network order). Each
rank fires ``b`` (its bucket goes on the wire), then abandons the step; then, as
``Trainer.fit`` does, zeroes every gradient *before* setting the sync up again, and trains one
step. Each rank writes its values after that step to ``OUT/values<rank>.npz``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync


def main() -> None:
    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    sync = MPISync(create_optimizer("sgd", lr=0.5), bucket_bytes=24, overlap=overlap, timeout=60)
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("ab")]
    try:
        sync.setup(params, {})
        sync.start_step(1)
        params[1].grad += 100.0
        params[1].inc_update(sync)
        sync.abandon_step()  # as the Trainer does when a layer raises mid-backward
        for p in params:  # Trainer.fit: network.zero_grad() before sync.setup
            p.zero_grad()
        sync.setup(params, {})
        sync.start_step(1)
        for p in reversed(params):
            p.grad += sync.rank + 1.0
            p.inc_update(sync)
        sync.finish_step()
        np.savez(out / f"values{sync.rank}.npz", **{p.name: p.value for p in params})
    finally:
        sync.close()


if __name__ == "__main__":
    main()
