"""A communicator that counts the bytes this rank puts on the wire: a wrapper around a real
mpi4py communicator, for measuring what a gradient wire costs (the allreduce benchmark, the
MPI tests of the 16-bit wire). MPISync takes one as its ``comm`` as it takes any other;
``distconv train`` never makes one."""

from __future__ import annotations

from typing import Any

import numpy as np


class CountingComm:
    """A real communicator that also counts the bytes this rank puts on the wire.

    Every call goes to ``comm``; the collectives below also add, from the ``nbytes`` of the
    buffers actually handed to MPI, what this rank sends in a bandwidth-optimal algorithm over
    ``n`` ranks: ``2(n-1)/n`` of an allreduce's buffer (reduce-scatter, then allgather),
    ``(n-1)/n`` of a reduce-scatter's or an alltoall's send buffer, ``n-1`` times an
    allgather's own block. A 16-bit wire therefore counts half the bytes of a float32 one, and
    a cast down and back up around a float32 allreduce counts as float32. :meth:`Dup` returns a
    counting duplicate, listed in :attr:`duplicates` (MPISync reduces gradients on one).

    Args:
        comm: an mpi4py communicator.
        in_place: ``MPI.IN_PLACE`` (whose buffer is then the receive buffer).

    Attributes:
        sent: bytes this rank sent through the counted collectives.
        calls: (method name, bytes of the buffer handed to MPI) of every counted call.
        duplicates: the counting communicators :meth:`Dup` made.
    """

    #: method -> (which buffer argument is the data, share of its bytes sent per rank)
    COUNTED = {
        "Allreduce": (0, lambda n: 2 * (n - 1) / n),
        "Iallreduce": (0, lambda n: 2 * (n - 1) / n),
        "Reduce_scatter_block": (0, lambda n: (n - 1) / n),
        "Ireduce_scatter_block": (0, lambda n: (n - 1) / n),
        "Alltoall": (0, lambda n: (n - 1) / n),
        "Ialltoall": (0, lambda n: (n - 1) / n),
        "Allgather": (0, lambda n: n - 1),
        "Iallgather": (0, lambda n: n - 1),
    }

    def __init__(self, comm: Any, in_place: Any) -> None:
        self._comm, self._in_place = comm, in_place
        self.sent = 0.0
        self.calls: list[tuple[str, int]] = []
        self.duplicates: list[CountingComm] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._comm, name)
        if name not in self.COUNTED:
            return method

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._count(name, args)
            return method(*args, **kwargs)

        return counted

    def _count(self, name: str, args: tuple) -> None:
        index, share = self.COUNTED[name]
        data = args[index]
        if data is self._in_place:
            data = args[index + 1]
            if name.lower().endswith(
                "allgather"
            ):  # in place: this rank's block of the receive buffer
                data = _array(data)[: _array(data).size // self.Get_size()]
        nbytes = _array(data).nbytes
        self.calls.append((name, nbytes))
        self.sent += nbytes * share(self.Get_size())

    def Dup(self) -> CountingComm:  # noqa: N802
        """A counting duplicate of the communicator."""
        dup = CountingComm(self._comm.Dup(), self._in_place)
        self.duplicates.append(dup)
        return dup


def _array(buffer: Any) -> np.ndarray:
    """The array in an mpi4py buffer argument (an array, or a list that starts with one)."""
    return np.asarray(buffer[0] if isinstance(buffer, list | tuple) else buffer)
