"""mpiexec -n 2 python -m mpi4py run_longdouble_params.py OVERLAP: long double parameters,
reduced by MPI's own SUM (``MPI_LONG_DOUBLE``), keep their precision.

Rank r hands in ``(r + 1) / 7`` for every element of a long double parameter of 7 elements
(not a multiple of the ranks), over two steps of SGD (lr 1, one example per rank). Rank 0 prints
the parameter's first value and the exact one, worked out in long double in one process, as
exact decimal strings: they must agree to long double's precision.
"""

from __future__ import annotations

import sys

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync

STEPS = 2


def main() -> None:
    sync = MPISync(create_optimizer("sgd", lr=1.0), overlap=sys.argv[1] == "1")
    p = Parameter("w", np.zeros(7, np.longdouble))
    sync.setup([p], {})
    for _ in range(STEPS):
        sync.start_step(1)
        p.grad[...] = np.longdouble(sync.rank + 1) / 7
        sync.on_gradient(p)
        sync.finish_step()
    sync.close()
    if sync.rank == 0:
        mean = (np.longdouble(1) / 7 + np.longdouble(2) / 7) / 2
        exact = -STEPS * mean
        print(np.format_float_positional(p.value[0]), np.format_float_positional(exact))


if __name__ == "__main__":
    main()
