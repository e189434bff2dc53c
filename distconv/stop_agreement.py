"""Where the ranks of a fit agree to stop: at the same step, by the same signal.

A stop request (:class:`~distconv.stop_request.StopRequest`) reaches one rank, or each at
another time; a rank that stopped alone would leave the others waiting in the next step's
collective. So the ranks sum their requests every :data:`STOP_CHECK_EVERY` steps, and at a
fit's last step (a signal after the last multiple would else never be agreed on: the fit would
end as if none came), and stop together, each exiting with the same status. The same sum
carries who got the signal (how many ranks, and their ranks' sum: the rank itself where one
alone did), so a rank that was not signalled says whose signal stopped it, and an operator
looks at the right node.

A parameter-server shard stopped alone by SIGTERM asks for the same stop: its replies carry
the ask while it drains (:mod:`~distconv.sync.ps.stop_asked`), and a rank that read one counts
it in the same sum, with the shard's index, as a SIGTERM no rank got itself. The job then stops
with a checkpoint at an agreed step, as by a worker's own SIGTERM, and exits 143.
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
        count: how many ranks got it (0: only a shard did).
        rank: the rank that got it, where one alone did (None where several did, or none).
        shard: the parameter-server shard that got SIGTERM and asked the ranks to stop, where
            the ranks that read its ask name one shard alike (None: no shard asked, or
            several did).
        shard_asked: whether any shard asked (:mod:`~distconv.sync.ps.stop_asked`).
    """

    signal: signal.Signals
    own: bool
    count: int
    rank: int | None
    shard: int | None = None
    shard_asked: bool = False

    def said(self, step: int) -> str:
        """The rank's last line: ``stopped by SIGTERM after step N`` on a rank that got it,
        ``stopped after step N: rank 1 got SIGTERM`` (or ``2 ranks got``) on the others, and
        ``stopped after step N: pserver shard 1 got SIGTERM`` where only a shard did, so the
        launcher and an operator can tell the signalled process from those it stopped."""
        name = self.signal.name
        if self.own:
            return f"stopped by {name} after step {step}"
        if self.count == 0:
            who = f"pserver shard {self.shard}" if self.shard is not None else "a pserver shard"
        elif self.rank is not None:
            who = f"rank {self.rank}"
        else:
            who = f"{self.count} ranks"
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
    asked = _shard_ask(getattr(sync, "stop_asked_by_shard", None))
    if sync.world_size == 1:
        summed = [*own, 0.0, 0.0, *asked]
    else:
        ours = [*own, *(flag * sync.rank for flag in own), *asked]
        summed = timed_collective(sync, sync.allreduce_sum, ours)
    agreed = _agreed(own, summed[:2], summed[2:4], summed[4:])
    if agreed is not None:
        stop.answered = True  # the fit stops by it: no later fit of this process does again
        if agreed.shard_asked:  # answered too: a later fit on this sync starts unasked
            sync.stop_asked_by_shard = None
    return agreed


def _shard_ask(shard: int | None) -> list[float]:
    """This rank's part of the sum for a shard's ask: ``[asked, index + 1, (index + 1)^2]``
    (zeros where none asked); summed, they tell whether the ranks that read an ask all name
    one shard (the mean of the squares is the square of the mean), and which."""
    if shard is None:
        return [0.0, 0.0, 0.0]
    return [1.0, shard + 1.0, (shard + 1.0) ** 2]


def _agreed(
    own: list[float], counts: list[float], rank_sums: list[float], asks: list[float]
) -> AgreedStop | None:
    """The stop from the ranks' summed flags (``counts``: ranks that got SIGTERM, Ctrl-C),
    their ranks' sums and their shards' asks (:func:`_shard_ask`, summed), from this rank's
    view (``own``: its flags); None: the fit goes on. A shard's ask is a SIGTERM, as its own
    was: it wins over Ctrl-C, and the job exits 143 either way."""
    asking, index_sum, square_sum = asks
    shard_asked = asking > 0
    signum = signal.SIGTERM if shard_asked else stop_signal(counts)
    if signum is None:
        return None
    which = 0 if signum == signal.SIGTERM else 1
    count = round(counts[which])
    rank = round(rank_sums[which]) if count == 1 else None
    shard = None
    if shard_asked:
        mean = index_sum / asking
        shard = round(mean) - 1 if abs(square_sum / asking - mean * mean) < 1e-6 else None
    return AgreedStop(signum, own[which] > 0, count, rank, shard, shard_asked)
