"""Allreduce over MPI behind the ``inc_update`` callback (see :mod:`distconv.sync.mpi.sync`)."""

from distconv.sync.mpi.comm import CountingComm, SingleRankComm, import_mpi
from distconv.sync.mpi.sync import DEFAULT_BUCKET_BYTES, MPISync

__all__ = ["DEFAULT_BUCKET_BYTES", "CountingComm", "MPISync", "SingleRankComm", "import_mpi"]
