"""mpiexec -n 2 python -m mpi4py run_lifecycle.py OUT MODE: a sync beyond one fit, and how it
ends. ``refit``: ``Trainer.fit`` twice on one MPISync with the communication thread; each rank
writes ``OUT/refit<rank>.json`` (the threads alive after the second fit and after close,
whether the first fit's gradient communicator was freed) and ``OUT/values<rank>.npz``.
``exitN``: every rank trains two steps and ends with ``sys.exit`` inside the ``try/finally``
that closes its sync, rank 0 with N, the others with 0.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync
from distconv.trainer import Trainer
from tests.mpi.common import small_lenet, trainer_data, weights


def threads() -> int:
    return sum(t.name == "distconv-allreduce" and t.is_alive() for t in threading.enumerate())


def refit(out: Path) -> None:
    from mpi4py import MPI

    sync = MPISync(create_optimizer("adam", lr=0.01), bucket_bytes=300, overlap=True)
    net = small_lenet(seed=0)
    try:
        trainer = Trainer(net, sync, 2, progress=False, dtype="float64")
        trainer.fit(trainer_data(24), epochs=1)
        first = sync._grad_comm.comm  # the MPI communicator under the watchdog's wrapper
        trainer.fit(trainer_data(24, seed=4), epochs=1)
        alive = threads()
    finally:
        sync.close()
    facts = {"alive": alive, "after_close": threads(), "freed": first == MPI.COMM_NULL}
    (out / f"refit{sync.rank}.json").write_text(json.dumps(facts))
    np.savez(out / f"values{sync.rank}.npz", **weights(net))


def leave_with(code: int) -> None:
    sync = MPISync(create_optimizer("sgd"))
    p = Parameter("w", np.ones(3))
    try:
        sync.setup([p], {})
        for _ in range(2):
            sync.start_step(1)
            p.grad += 1.0
            p.inc_update(sync)
            sync.finish_step()
        sys.exit(code if sync.rank == 0 else 0)
    finally:
        sync.close()


if __name__ == "__main__":
    out, mode = Path(sys.argv[1]), sys.argv[2]
    if mode == "refit":
        refit(out)
    else:
        leave_with(int(mode.removeprefix("exit")))
