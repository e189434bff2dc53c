"""mpiexec -n 2 python -m mpi4py run_sigint_mid_step.py WHERE: Ctrl-C on rank 1 in step 1.

A script of its own (no Trainer, whose handler stops at an agreed step): three parameters in
buckets of their own, reduced on the communication thread. Rank 1 raises SIGINT on itself
(Python's own handler: ``KeyboardInterrupt``) at ``WHERE``: ``grad``, before the last
gradient, two buckets on the thread; ``finish``, before ``finish_step``, every bucket handed
over, the last one in flight. Rank 0 trains on, into the step's collectives; ``close`` in the
``finally`` must end the job. Each rank that ends its three steps prints ``rank R done``.
"""

from __future__ import annotations

import signal
import sys

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync


def main() -> None:
    where = sys.argv[1]
    sync = MPISync(create_optimizer("sgd", lr=0.01), overlap=True, bucket_bytes=64, timeout=30)
    params = [Parameter(name, np.zeros(8)) for name in "abc"]
    interrupted = lambda here, step: sync.rank == 1 and step == 1 and here == where  # noqa: E731
    try:
        sync.setup(params, {})
        for step in range(3):
            sync.start_step(4)
            for k, p in enumerate(reversed(params)):
                p.grad[...] = 1.0
                if k == 2 and interrupted("grad", step):
                    signal.raise_signal(signal.SIGINT)
                sync.on_gradient(p)
            if interrupted("finish", step):
                signal.raise_signal(signal.SIGINT)
            sync.finish_step()
    finally:
        sync.close()
    print(f"rank {sync.rank} done")


if __name__ == "__main__":
    main()
