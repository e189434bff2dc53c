"""The sync contract's job-level collectives over an MPI communicator: everything a rank
exchanges with the others besides gradients (start-up broadcasts, the job check, metrics)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distconv.sync.local import LocalSync
from distconv.sync.mpi.comm import bcast_in_place, same_job


class RankCollectives(LocalSync):
    """A :class:`~distconv.sync.local.LocalSync` whose ranks meet on ``self.comm``.

    A subclass sets ``comm``, ``rank``, ``world_size`` and ``_in_place``/``_op``
    (``MPI.IN_PLACE`` and ``MPI.SUM``, or None and None for a single-rank stand-in).
    """

    comm: Any
    _in_place: Any
    _op: Any

    def broadcast_parameters(self) -> None:
        """Copy rank 0's parameter values and optimizer state to every rank."""
        for p in self.params:
            self._bcast(p.value)
            for key in sorted(self.state[p.name]):
                self._bcast(self.state[p.name][key])

    def _bcast(self, array: Any) -> None:
        if self.world_size > 1:
            bcast_in_place(self.comm, array)

    def all_equal(self, description: Mapping[str, Any]) -> None:
        """Compare a digest of ``description`` across ranks; on a mismatch, name the difference.

        Raises:
            SyncError: naming this rank, the first rank that differs, and the first differing key.
        """
        same_job(self.comm, self.rank, description)

    def allreduce_sum(self, values: Sequence[float]) -> list[float]:
        """Sum small metrics over every rank (float64)."""
        buf = np.array([float(v) for v in values], dtype=np.float64)
        self.comm.Allreduce(self._in_place, buf, self._op)
        return buf.tolist()

    def barrier(self) -> None:
        """Return once every rank has called it."""
        self.comm.Barrier()
