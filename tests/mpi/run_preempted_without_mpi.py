"""A script of one's own under ``run_main``, run by ``mpiexec`` but using no MPI (a LocalSync's
ranks, say), whose rank 0 stops as a preemption stops it (``Preempted``, exit 143) while rank 1
finishes a second later: ``run_preempted_without_mpi.py``."""

from __future__ import annotations

import os
import sys
import time

from distconv.distributed import run_main
from distconv.stop_request import Preempted


def main() -> None:
    rank = os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK")
    if rank == "0":
        raise Preempted("stopped by SIGTERM after step 8", 143)
    time.sleep(1)
    assert "mpi4py.MPI" not in sys.modules  # nothing here initialised MPI


run_main(main)
