"""A script of one's own under ``run_main``, as ``python -m mpi4py`` runs it, whose ranks stop as
a preemption stops them (``Preempted``, exit 143) once MPI is up; each first records the MPICH
shared-memory files it maps (``RECORDS/rank<r>.shm``): ``run_preempted_script.py RECORDS``."""

from __future__ import annotations

import sys
from pathlib import Path

from mpi4py import MPI

from distconv.distributed import run_main
from distconv.stop_request import Preempted
from distconv.sync.mpi.shared_memory import mapped_segments


def main() -> None:
    rank = MPI.COMM_WORLD.Get_rank()  # MPI_Init has run: the segment is mapped
    (Path(sys.argv[1]) / f"rank{rank}.shm").write_text("\n".join(mapped_segments()))
    raise Preempted("stopped by SIGTERM after step 8", 143)


run_main(main)
