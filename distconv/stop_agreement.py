"""Where the ranks of a fit agree to stop: at the same step, by the same signal.

A stop request (:class:`~distconv.stop_request.StopRequest`) reaches one rank, or each at
another time; a rank that stopped alone would leave the others waiting in the next step's
collective. So the ranks sum their requests every :data:`STOP_CHECK_EVERY` steps and stop
together, each exiting with the same status.
"""

from __future__ import annotations

import signal

from distconv.stop_request import StopRequest, stop_signal
from distconv.sync import SyncStrategy
from distconv.sync.collective_time import timed_collective

#: ranks agree on a stop (SIGTERM, Ctrl-C) every this many steps: a collective costs a round trip
STOP_CHECK_EVERY = 8


def stop_agreed(sync: SyncStrategy, stop: StopRequest, step: int) -> signal.Signals | None:
    """The signal (SIGTERM or Ctrl-C) any rank got, or None, after optimizer step ``step``: all
    ranks stop at the same step, and by the same signal, so they exit with the same status.

    Ranks agree every :data:`STOP_CHECK_EVERY` steps (a collective: every rank calls it after
    each step); one rank alone stops at the step after the signal. The flags are read before
    the collective and cleared only when a fit starts, so a signal during it counts at the next.
    The time waited in it is added to ``sync.collective_seconds`` (a rank ahead of the others
    waits here: in asynchronous training, for the slowest).
    """
    if sync.world_size == 1:
        return stop_signal(stop.flags) if stop.received else None
    if step % STOP_CHECK_EVERY:
        return None
    return stop_signal(timed_collective(sync, sync.allreduce_sum, stop.flags))
