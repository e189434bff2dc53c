"""A rank slow to start (its imports on a loaded host): ``run_rank_late.py SECONDS SCRIPT ...``
runs ``SCRIPT ...`` as ``python -m mpi4py`` would, rank 1 only after waiting ``SECONDS`` before
anything initialises MPI, so that the other ranks wait for it in ``MPI_Init``."""

from __future__ import annotations

import os
import runpy
import sys
import time

seconds, script = float(sys.argv[1]), sys.argv[2]
if os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK")) == "1":
    time.sleep(seconds)
sys.argv = sys.argv[2:]
runpy.run_path(script, run_name="__main__")
