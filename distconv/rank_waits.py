"""What each rank of this process waits in now, for its ``/healthz`` to say.

A rank waiting for a straggler beats no step, so its ``/healthz`` turns ``stalled`` as the
straggler's does: ``stalled: worker 0, last step 198, 8.0 s ago (limit 5 s)`` read as if the
healthy rank were stuck. The sync that waits notes it here (:func:`waiting`), by rank (tests
run several ranks in one process), and :class:`~distconv.service.ServiceEndpoints` adds it to a
stall's line: ``...; waiting 7.9 s for pserver shard(s) 0: step 199``. The waiting thread
sets and clears an entry; the probe's thread only reads one (a dict's get and set are atomic).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Wait:
    """A wait under way: what for (``for pserver shard(s) 0: step 199``, made when asked:
    a wait that ends before a probe asks makes no words), and since when
    (``time.monotonic()``)."""

    words: Callable[[], str]
    since: float

    def text(self, now: float | None = None) -> str:
        """``waiting 7.9 s for pserver shard(s) 0: step 199``: the wait as ``/healthz`` says it."""
        seconds = (time.monotonic() if now is None else now) - self.since
        return f"waiting {seconds:.1f} s {self.words()}"


_WAITS: dict[int, Wait] = {}


@contextmanager
def waiting(rank: int, wait: Wait) -> Iterator[None]:
    """Note that ``rank`` waits in ``wait`` within the block; the wait it was in before (an
    outer one) again after it."""
    outer = _WAITS.get(rank)
    _WAITS[rank] = wait
    try:
        yield
    finally:
        if outer is None:
            _WAITS.pop(rank, None)
        else:
            _WAITS[rank] = outer


def current(rank: int) -> Wait | None:
    """The wait ``rank`` is in now; None where it waits in nothing noted."""
    return _WAITS.get(rank)
