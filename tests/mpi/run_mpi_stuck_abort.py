"""mpiexec -n 2 python -m mpi4py run_mpi_stuck_abort.py OUT: rank 0's communication thread is
stuck inside MPI when its close aborts the job.

Rank 0's gradient start first enters a real blocking MPI call that rank 1 never joins (a
``Barrier`` on the gradients' communicator, past the watchdog, which watches requests' waits
only): a start stuck on a broken link. Its ``finish_step`` gives up after 1.5 x ``timeout``
(1 s) and says so (``OUT/finish0.txt``); the error propagates, and ``close`` calls
``MPI_Abort`` from the main thread while the thread is still inside ``MPI_Barrier``. Rank 1
waits outside MPI meanwhile (a long pass), so nothing but that abort ends the job.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync

#: how long rank 1's pass lasts: the job ends long before, by rank 0's abort, or the test fails
PASS_SECONDS = 60


def main() -> None:
    out = Path(sys.argv[1])
    sync = MPISync(create_optimizer("sgd"), overlap=True, timeout=1.0)
    param = Parameter("w", np.arange(3.0))
    try:
        sync.setup([param], {})
        sync.start_step(1)
        if sync.rank == 1:
            time.sleep(PASS_SECONDS)
            return
        raw = sync._grad_comm.comm  # the gradients' communicator, unwatched
        sync._grad_comm.__dict__["Iallreduce"] = lambda *args, **kwargs: raw.Barrier()
        param.grad += 1.0
        sync(param)
        try:
            sync.finish_step()
        except Exception as exc:
            (out / "finish0.txt").write_text(f"{type(exc).__name__}: {exc}")
            raise
    finally:
        sync.close()


if __name__ == "__main__":
    main()
