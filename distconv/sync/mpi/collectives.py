"""The sync contract's job-level collectives over an MPI communicator: everything a rank
exchanges with the others besides gradients (start-up broadcasts, the job check, metrics).

Setup's job check, a metrics sum and the barrier open with the ranks' exchange of where they are
(:meth:`~distconv.sync.mpi.step_check.StepCheck.meet`), as every step does: a rank that sums
while another starts a step, or closes, or sets up again, is named, not left waiting."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.mpi.comm import bcast_in_place, same_job
from distconv.sync.mpi.step_check import BARRIER, SETUP, SUMMING, StepCheck, where


class RankCollectives(LocalSync):
    """A :class:`~distconv.sync.local.LocalSync` whose ranks meet on ``self.comm``.

    A subclass sets ``comm``, ``rank``, ``world_size``, ``_in_place``/``_op`` (``MPI.IN_PLACE``
    and ``MPI.SUM``, or None and None for a single-rank stand-in), ``_check`` (the ranks'
    exchange of where they are, on ``comm``), ``step`` (the steps it finished) and ``_open``
    (what is under way, from setup or a step's start to its last collective; None between
    steps).
    """

    comm: Any
    _in_place: Any
    _op: Any
    _check: StepCheck
    step: int
    _open: str | None

    def broadcast_parameters(self) -> None:
        """Copy rank 0's parameter values and optimizer state to every rank (setup's: after
        :meth:`all_equal`'s exchange found every rank in setup)."""
        for p in self.params:
            self._bcast(p.value)
            for key in sorted(self.state[p.name]):
                self._bcast(self.state[p.name][key])

    def _bcast(self, array: Any) -> None:
        if self.world_size > 1:
            bcast_in_place(self.comm, array)

    def all_equal(self, description: Mapping[str, Any]) -> None:
        """Compare a digest of ``description`` across ranks; on a mismatch, name the difference.

        Setup's first collective. It opens with the ranks' exchange of where they are
        (:data:`~distconv.sync.mpi.step_check.SETUP`): a rank that sets up again, or late,
        while another is at a step or a meeting is named there, not left waiting in setup's
        blocking collectives, which match none of theirs.

        Raises:
            SyncError: naming this rank, the first rank that differs, and the first differing
                key; or what each rank is doing, where a rank is not in setup.
        """
        self._check.meet(SETUP, self.step)
        same_job(self.comm, self.rank, description)

    def allreduce_sum(self, values: Sequence[float]) -> list[float]:
        """Sum small metrics over every rank (float64), between steps."""
        buf = np.array([float(v) for v in values], dtype=np.float64)
        self._meet(SUMMING, len(buf))
        self.comm.Allreduce(self._in_place, buf, self._op)
        return buf.tolist()

    def barrier(self) -> None:
        """Return once every rank has called it, between steps (the exchange of where they
        are is one)."""
        self._meet(BARRIER)

    def _meet(self, what: int, count: int = 0) -> None:
        """Check that every rank is at this meeting (``what``, with ``count`` values).

        Raises:
            SyncError: naming what each rank is doing, where any differs; or called before
                setup, inside a step (with the communication thread, the main thread makes no
                MPI call there) or after one that failed (the ranks may differ since).
        """
        if self._open is not None:
            said = where((what, self.step, count))
            raise SyncError(f"{said}: the ranks meet between steps, not in {self._open}")
        self._check.meet(what, self.step, count)
