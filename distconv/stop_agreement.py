"""Where the ranks of a fit agree to stop: at the same step, by the same signal.

A stop request (:class:`~distconv.stop_request.StopRequest`) reaches one rank, or each at
another time; a rank that stopped alone would leave the others waiting in the next step's
collective. So the ranks sum their requests every :data:`STOP_CHECK_EVERY` steps, and at a
fit's last step (a signal after the last multiple would else never be agreed on: the fit would
end as if none came), and stop together, each exiting with the same status. The same sum
carries who got the signal (how many ranks, and their ranks' sum: the rank itself where one
alone did), so a rank that was not signalled says whose signal stopped it, and an operator
looks at the right node.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from distconv.stop_request import StopRequest, stop_signal
from distconv.sync import SyncStrategy
from distconv.sync.collective_time import timed_collective

#: ranks agree on a stop (SIGTERM, Ctrl-C) every this many steps: a collective costs a round trip
STOP_CHECK_EVERY = 8


@dataclass(frozen=True)
class AgreedStop:
    """A stop the ranks agreed on.

    Attributes:
        signal: the signal every rank stops by (SIGTERM wins over Ctrl-C).
        own: whether this rank got that signal itself.
        count: how many ranks got it.
        rank: the rank that got it, where one alone did (None where several did).
    """

    signal: signal.Signals
    own: bool
    count: int
    rank: int | None

    def said(self, step: int) -> str:
        """The rank's last line: ``stopped by SIGTERM after step N`` on a rank that got it,
        ``stopped after step N: rank 1 got SIGTERM`` (or ``2 ranks got``) on the others, so
        the launcher and an operator can tell the signalled rank from those it stopped."""
        name = self.signal.name
        if self.own:
            return f"stopped by {name} after step {step}"
        who = f"rank {self.rank}" if self.rank is not None else f"{self.count} ranks"
        return f"stopped after step {step}: {who} got {name}"


def stop_agreed(
    sync: SyncStrategy, stop: StopRequest, step: int, last: bool = False
) -> AgreedStop | None:
    """The stop any rank asked for (SIGTERM or Ctrl-C), or None, after optimizer step
    ``step`` (``last``: the fit's last): all ranks stop at the same step, and by the same
    signal, so they exit with the same status; ``stop`` is then answered.

    Ranks agree every :data:`STOP_CHECK_EVERY` steps and at the fit's last step (a collective:
    every rank calls it after each step, with the same ``last``); one rank alone stops at the
    step after the signal. The flags are read before the collective, so a signal during it
    counts at the next check, or, after the last, in the process's next fit
    (:meth:`~distconv.stop_request.StopRequest.install_for_fit`).
    The time waited in it is added to ``sync.collective_seconds`` (a rank ahead of the others
    waits here: in asynchronous training, for the slowest). It stays one small sum: the two
    flags and the same flags times this rank.
    """
    if sync.world_size > 1 and step % STOP_CHECK_EVERY and not last:
        return None  # no check at this step: nothing to read
    own = stop.flags
    if sync.world_size == 1:
        agreed = _agreed(own, own, [0.0, 0.0]) if stop.received else None
    else:
        ours = [*own, *(flag * sync.rank for flag in own)]
        summed = timed_collective(sync, sync.allreduce_sum, ours)
        agreed = _agreed(own, summed[:2], summed[2:])
    if agreed is not None:
        stop.answered = True  # the fit stops by it: no later fit of this process does again
    return agreed


def _agreed(own: list[float], counts: list[float], rank_sums: list[float]) -> AgreedStop | None:
    """The stop from the ranks' summed flags (``counts``: ranks that got SIGTERM, Ctrl-C) and
    their ranks' sums, from this rank's view (``own``: its flags); None: the fit goes on."""
    signum = stop_signal(counts)
    if signum is None:
        return None
    which = 0 if signum == signal.SIGTERM else 1
    count = round(counts[which])
    rank = round(rank_sums[which]) if count == 1 else None
    return AgreedStop(signum, own[which] > 0, count, rank)
