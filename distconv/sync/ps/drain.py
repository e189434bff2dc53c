"""How a shard stops on SIGTERM: it drains, serving on while its workers checkpoint.

A pod eviction, a deleted job or the launcher's death signals the workers and the shards at
once, and a worker writes its checkpoint through the shards before it says ``bye``; a shard
that quit at its signal would cost the work since the last checkpoint. So at SIGTERM a shard
goes on serving while a worker that said ``hello`` has not said ``bye`` (nor was lost, nor
sent a failure note since: :mod:`~distconv.sync.ps.setup_notes`), and
stops when none is left, when the job has failed, at SIGINT or a SIGTERM
:data:`REPEAT_SECONDS` or more after the first (the kernel's parent-death signal comes once
per thread of a dead launcher, so repeats within that second are the same request), after
``--drain-seconds``, or once every worker still in has trained :data:`DRAIN_STEPS` steps and
:data:`DRAIN_FLOOR_SECONDS` since the signal: a signalled worker stops within 8 steps of its
own signal (it agrees on a stop every 8 steps, docs/protocol.md), which may come a few seconds
after the shard's (the kubelets signal a job's pods one by one), so workers that train on past
both were not signalled: the shard was stopped on its own (a node drain, a rolling restart)
and need not hold its replacement back for the whole drain.
"""

from __future__ import annotations

import logging
import time

from distconv.sync.ps.config import ShardConfig

log = logging.getLogger("distconv.pserver")

#: steps a worker still in may train after the shard's signal before the shard stops waiting:
#: twice the trainer's stop check (STOP_CHECK_EVERY, 8), for a signal that reaches it later
DRAIN_STEPS = 16
#: ... and the seconds it may take after the shard's signal (or the whole drain, if shorter):
#: a steps-only rule ended the drain before a worker signalled half a second later had stopped
DRAIN_FLOOR_SECONDS = 10.0
#: a SIGTERM this long after the first says "stop now"; sooner, it is the same request
REPEAT_SECONDS = 1.0
#: how long a drain goes on before the shard says whom it waits for: the launcher's own stop
#: (SIGTERM, then at once SIGINT) ends it sooner, and must not read as a wait in the log
SAY_AFTER_SECONDS = 0.5


class Draining:
    """The stop side of :class:`~distconv.sync.ps.server.Shard` (whose state it shares)."""

    index: int
    config: ShardConfig
    accepted_at: dict[int, int]
    left: set[int]
    lost: set[int]
    noted_at: dict[int, tuple[str, int]]  # the ranks whose latest hello is a failure note
    failed: str | None
    last_step: dict[int, int]
    _stop: bool

    def __init__(self) -> None:
        self._drain_until: float | None = None  # set at the first signal
        self._drain_began = 0.0
        self._drain_from: dict[int, int] | None = None  # each rank's step then
        self._drain_said = False

    def drain(self) -> None:
        """SIGTERM: ask :meth:`serve` to return once the workers have stopped (see the module);
        a call :data:`REPEAT_SECONDS` or more after the first stops at once (signal-safe: it
        only sets attributes)."""
        now = time.monotonic()
        if self._drain_until is None:
            self._drain_began, self._drain_until = now, now + self.config.drain_seconds
        elif now - self._drain_began >= REPEAT_SECONDS:
            self._stop = True

    @property
    def draining(self) -> bool:
        return self._drain_until is not None

    def drained(self, now: float) -> bool:
        """Whether a draining shard may stop now; logs what it waits for, and why it stops."""
        # a rank whose latest hello is a failure note (its fit failed before setup) has no
        # worker in the job to checkpoint: its next fit says hello again
        working = sorted(set(self.accepted_at) - self.left - self.lost - set(self.noted_at))
        if self._drain_from is None:  # the first look since the signal
            self._drain_from = dict(self.last_step)
        if not working or self.failed is not None:
            return True
        floor = min(self.config.drain_seconds, DRAIN_FLOOR_SECONDS)
        went_on = now - self._drain_began >= floor and all(
            self.last_step.get(r, -1) >= self._drain_from.get(r, -1) + DRAIN_STEPS for r in working
        )
        ranks = ", ".join(map(str, working))
        if went_on:
            log.warning(
                "shard %d: stopping: rank(s) %s trained on %d steps and %g s since the signal "
                "(they were not stopped with it)", self.index, ranks, DRAIN_STEPS, floor,
            )  # fmt: skip
            return True
        if now >= self._drain_until:
            log.warning("shard %d: stopping with rank(s) %s still in", self.index, ranks)
            return True
        if not self._drain_said and now - self._drain_began >= SAY_AFTER_SECONDS:
            self._drain_said = True
            log.warning(
                "shard %d: stopping once they say bye with rank(s) %s still in (SIGINT, or "
                "SIGTERM again, stops it now)", self.index, ranks,
            )  # fmt: skip
        return False
