""":class:`~distconv.sync.mpi.counting.CountingComm` in one process, over
:class:`~distconv.sync.mpi.comm.SingleRankComm`: each counted call recorded with the bytes of
the buffer handed to it (the receive buffer where the send one is ``IN_PLACE``), the calls it
does not count passed through, and its duplicates listed. What a rank sends among several is
``test_wire.py``'s, under ``mpiexec -n 2``."""

from __future__ import annotations

import numpy as np

from distconv.sync import mpi
from distconv.sync.mpi.comm import SingleRankComm
from distconv.sync.mpi.counting import CountingComm


def test_counted_calls_carry_the_bytes_of_the_buffers_handed_to_mpi():
    comm = CountingComm(SingleRankComm(), None)  # SingleRankComm's IN_PLACE is None
    send, recv = np.arange(10, dtype=np.float32), np.zeros(10, np.float32)
    comm.Allreduce(send, recv)
    comm.Iallreduce(None, np.zeros(3, np.float64)).Wait()  # in place: the receive buffer
    comm.Allgather(np.zeros(2, np.float16), np.zeros(2, np.float16))
    comm.Bcast(np.zeros(5, np.uint8))  # not counted: passed through as it is
    assert comm.calls == [("Allreduce", 40), ("Iallreduce", 24), ("Allgather", 4)]
    np.testing.assert_array_equal(recv, send)  # each call reached the communicator
    assert comm.sent == 0.0  # one rank sends nothing
    assert comm.Get_rank() == 0 and comm.Get_size() == 1


def test_a_duplicate_counts_on_its_own_and_is_listed():
    comm = CountingComm(SingleRankComm(), None)
    dup = comm.Dup()
    dup.Ialltoall(np.zeros(6, np.uint8), np.zeros(6, np.uint8)).Wait()
    assert comm.duplicates == [dup] and isinstance(dup, CountingComm)
    assert dup.calls == [("Ialltoall", 6)] and comm.calls == []
    assert mpi.CountingComm is CountingComm  # the package's name for it
