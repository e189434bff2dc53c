"""Allreduce over MPI behind the ``inc_update`` callback (see :mod:`distconv.sync.mpi.sync`)."""

from distconv.sync.mpi.comm import SingleRankComm, import_mpi
from distconv.sync.mpi.counting import CountingComm
from distconv.sync.mpi.sync import DEFAULT_BUCKET_BYTES, MPISync

__all__ = ["DEFAULT_BUCKET_BYTES", "CountingComm", "MPISync", "SingleRankComm", "import_mpi"]
