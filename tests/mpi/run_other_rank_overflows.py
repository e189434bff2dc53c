"""mpiexec -n 2 python -m mpi4py run_other_rank_overflows.py GRAD_DTYPE OUT: one step of a
float16 parameter of 5 elements (a bucket padded to the world size, so each rank's own sums
stay in its host buffer beside the wire's copy) over 512 examples a rank, whose gradient sums
overflowed float16 on rank 1 alone. ``GRAD_DTYPE``: the wire's (``none``: the gradients' own).
Each rank writes what the step raised to ``OUT/rank<r>.err`` and closes its sync."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync


def main() -> None:
    wire, out = sys.argv[1], Path(sys.argv[2])
    sync = MPISync(create_optimizer("sgd"), grad_dtype=None if wire == "none" else wire)
    param = Parameter("w", np.zeros(5, np.float16))
    sync.setup([param], {})
    try:
        sync.start_step(512)
        param.grad += np.float16(np.inf if sync.rank == 1 else 1)  # as the layers wrote them
        sync(param)
        sync.finish_step()
        said = "no error"
    except Exception as exc:  # every rank refuses the same bucket: each says its own words
        said = f"{type(exc).__name__}: {exc}"
    finally:
        sync.close()
    (out / f"rank{sync.rank}.err").write_text(said)


if __name__ == "__main__":
    main()
