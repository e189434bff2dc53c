"""The ranks' agreement at each step: the same step, the same bucket layout, and the examples.

:class:`~distconv.sync.mpi.sync.MPISync` posts one small non-blocking ``Iallgather`` of
``(step, layout hash, examples)`` when a step starts and completes it just before the step's
first gradient collective. By then it has long arrived, so the ranks meet once a step, at the
gradients, not twice; and a rank that disagrees is named there, on every rank, before any of
them can hang in a reduction of another size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distconv.sync.base import SyncError
from distconv.sync.mpi.comm import difference_from

#: the step a rank posts when it closes its sync: a rank still at a step learns it has gone
CLOSED = -1


class StepCheck:
    """One step's exchange on ``comm``: :meth:`post`, then :meth:`complete` (or :meth:`drain`)."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self._request: Any = None
        self._every = np.zeros((0, 3), dtype=np.int64)
        self._mine = np.zeros(3, dtype=np.int64)
        self._step = 0
        self._layout: Mapping[str, Any] = {}

    @property
    def pending(self) -> bool:
        """Whether a posted exchange has not been completed yet."""
        return self._request is not None

    def post(self, step: int, layout: Mapping[str, Any], layout_hash: int, examples: int) -> None:
        """Start the exchange of this rank's step, layout hash and examples."""
        self._step, self._layout = step, layout
        self._mine = np.array([step, layout_hash, examples], dtype=np.int64)
        self._every = np.zeros((self.comm.Get_size(), 3), dtype=np.int64)
        self._request = self.comm.Iallgather(self._mine, self._every)

    def complete(self) -> int | None:
        """Wait for the exchange and check it.

        Returns:
            The step's examples summed over the ranks, or None when nothing was pending.

        Raises:
            SyncError: the ranks are at different steps, or lay out their buckets differently.
        """
        if not self.drain():
            return None
        steps, hashes, examples = zip(*self._every.tolist())  # plain ints: a few rows
        if len(set(steps)) > 1:
            named = ", ".join(
                f"rank {r}: {'closed' if s == CLOSED else s}" for r, s in enumerate(steps)
            )
            hint = "; a rank closed its sync after fewer steps" if CLOSED in steps else ""
            raise SyncError(f"ranks are at different steps ({named}){hint}")
        if len(set(hashes)) > 1:
            self._raise_layout_mismatch(hashes)
        return sum(examples)

    def say_closed(self) -> None:
        """The last exchange, when this rank closes: every other rank closes too, or is named
        at the step it is at (a rank still in a step would otherwise wait here forever).

        Raises:
            SyncError: another rank is still at a step.
        """
        self.post(CLOSED, {}, 0, 0)
        self.complete()

    def drain(self) -> bool:
        """Wait for a pending exchange without checking it (MPI must see every posted
        collective complete); whether one was pending."""
        if self._request is None:
            return False
        request, self._request = self._request, None
        request.Wait()
        return True

    def _raise_layout_mismatch(self, hashes: Sequence[int]) -> None:
        rank = self.comm.Get_rank()
        same = [h == hashes[rank] for h in hashes]
        other, diff = difference_from(self.comm, dict(self._layout), same)
        raise SyncError(
            f"step {self._step}: rank {rank} and rank {other} lay out gradient buckets "
            f"differently (parameters fired in another order?): {diff}"
        )
