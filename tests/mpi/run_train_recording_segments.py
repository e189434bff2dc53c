"""A rank of ``distconv train`` under ``python -m mpi4py``, as the launcher starts it, that first
records the MPICH shared-memory files it maps (``RECORDS/rank<r>.shm``, one path a line):
``run_train_recording_segments.py RECORDS train ...``. The names are this job's alone, so a
test reads whether they are left in ``/dev/shm`` however many other jobs run beside it."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from mpi4py import MPI

from tests.mpi.common import record_segments

records, command = Path(sys.argv[1]), sys.argv[2:]
rank = MPI.COMM_WORLD.Get_rank()  # MPI_Init has run: the segment is mapped
record_segments(records, rank)
sys.argv = ["distconv", *command]  # what `-m distconv` would see
runpy.run_module("distconv", run_name="__main__", alter_sys=True)
