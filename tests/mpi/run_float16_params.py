"""mpiexec -n 2 python -m mpi4py run_float16_params.py OVERLAP [SIZE]: float16 parameters whose
per-rank gradient sums fit float16 but whose sum over the ranks does not.

Each rank hands in the sum of its 512 examples' gradients, 40000 (78.125 per example); over two
ranks that is 80000, past float16's 65504, unless the bucket is averaged before the wire. Rank 0
prints the parameter after one SGD step (lr 0.01): -0.78125 when it was. A float32 parameter
beside it, with the same gradients, goes in a bucket of its own after it in the layout (with the
thread: the float16 bucket whole, then the float32 one's piece) and ends the same.
"""

from __future__ import annotations

import sys

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync


def main() -> None:
    sync = MPISync(create_optimizer("sgd", lr=0.01), overlap=sys.argv[1] == "1")
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 8  # not a multiple of the ranks: padded
    p = Parameter("w", np.zeros(size, np.float16))
    q = Parameter("v", np.zeros(8, np.float32))
    sync.setup([q, p], {})  # laid out in reverse: w, then v
    sync.start_step(512)
    for param in (p, q):
        param.grad[...] = 40000.0
        sync.on_gradient(param)
    sync.finish_step()
    sync.close()
    if sync.rank == 0:
        print(" ".join(str(float(v)) for v in (*p.value, *q.value)))


if __name__ == "__main__":
    main()
