"""The time a rank waits in the collectives the Trainer makes between steps.

A step's own exchange is the strategy's (``traffic()``'s ``sync_seconds``); around the steps
the Trainer sums the ranks' stop requests every few steps, folds the epoch's metric sums,
gathers the ranks' rates, sums a test set's shares and meets at each checkpoint's barrier. A
rank ahead of the others waits there, and in asynchronous training that is where a fast worker
waits for a slow one: :func:`timed_collective` makes each such call and adds the time it took
to the strategy's running total, ``collective_seconds``, which ``traffic()`` reports (where
there are several ranks) and each epoch's record reads
(:class:`~distconv.epoch_tally.EpochTally`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # a type here, nothing more
    from distconv.sync.base import SyncStrategy

T = TypeVar("T")


def collective_seconds(sync: SyncStrategy) -> float:
    """``sync.collective_seconds``: 0 where there is none yet (a stand-in for a strategy, with
    the collectives alone, keeps none until its first)."""
    return getattr(sync, "collective_seconds", 0.0)


def timed_collective(sync: SyncStrategy, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)``, one of ``sync``'s collectives (``sync.allreduce_sum``,
    ``sync.barrier``), its wall time added to ``sync.collective_seconds``, whether it returns
    or raises: the time waited is spent either way."""
    began = time.perf_counter()
    try:
        return call(*args)
    finally:
        sync.collective_seconds = collective_seconds(sync) + time.perf_counter() - began
