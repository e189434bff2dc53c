"""Communicators: mpi4py's, imported only when asked for, or a stand-in for one process."""

from __future__ import annotations

import os
from typing import Any

import numpy as np


def import_mpi() -> Any | None:
    """``mpi4py.MPI``, or None when mpi4py (or its MPI library) is not installed."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI


class _Done:
    """A request that is already complete (what :class:`SingleRankComm` returns)."""

    def Wait(self) -> None:  # noqa: N802 - mpi4py's spelling
        """Nothing to wait for."""

    def Test(self) -> bool:  # noqa: N802
        return True


class SingleRankComm:
    """The few communicator calls MPISync makes, for one process and without MPI.

    Collectives over one rank copy the send buffer into the receive buffer (or do nothing for
    ``IN_PLACE``, which is ``None`` here).
    """

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Get_size(self) -> int:  # noqa: N802
        return 1

    def Allreduce(self, send: Any, recv: Any, op: Any = None) -> None:  # noqa: N802
        if send is not None:
            recv[...] = send

    def Iallreduce(self, send: Any, recv: Any, op: Any = None) -> _Done:  # noqa: N802
        self.Allreduce(send, recv, op)
        return _Done()

    def Allgather(self, send: Any, recv: Any) -> None:  # noqa: N802
        recv.reshape(-1)[...] = np.asarray(send).reshape(-1)

    def Allgatherv(self, send: Any, recv: Any) -> None:  # noqa: N802
        recv[0][...] = send

    def Ialltoall(self, send: Any, recv: Any) -> _Done:  # noqa: N802
        self.Allgather(send, recv)
        return _Done()

    Iallgather = Ialltoall

    def Bcast(self, buf: Any, root: int = 0) -> None:  # noqa: N802
        """Rank 0 already holds the value."""

    def Barrier(self) -> None:  # noqa: N802
        """Nothing to wait for."""

    def Dup(self) -> SingleRankComm:  # noqa: N802
        return self

    def Free(self) -> None:  # noqa: N802
        """Nothing to release."""

    def Abort(self, code: int = 1) -> None:  # noqa: N802
        os._exit(code)
