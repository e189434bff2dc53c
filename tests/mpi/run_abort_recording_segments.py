"""A rank of ``distconv train`` run as ``python -m mpi4py -m distconv`` would, that records the
MPICH shared-memory files it maps, unlinked or not (``RECORDS/rank<r>.shm``, one path a line),
the moment it aborts the job: ``run_abort_recording_segments.py RECORDS train ...``.

Nothing here imports mpi4py's ``MPI``: a rank failing before its sync is built (a bad option)
initialises MPI only to abort (:func:`distconv.sync.mpi.leaving.abort_uninitialised`), and the
node's files must be unlinked on that way too. The abort itself is the real one, called on."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from distconv.sync.mpi import leaving
from tests.mpi.common import record_segments

records, command = Path(sys.argv[1]), sys.argv[2:]
real_abort = leaving.abort


def recording_abort(comm, status: int) -> None:
    """Record the segments this rank maps, then abort as it would have."""
    record_segments(records, comm.Get_rank())
    real_abort(comm, status)


leaving.abort = recording_abort
sys.argv = ["distconv", *command]  # what `-m distconv` would see
runpy.run_module("distconv", run_name="__main__", alter_sys=True)
