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

A shard stopped on its own asks its workers for that checkpointed stop itself: while it drains,
its ``ok`` replies carry :data:`~distconv.sync.ps.stop_asked.STOP_ASKED`
(:meth:`Draining.stop_ask_fields`), which a worker's stop agreement reads as a SIGTERM of its
own, so they stop within 8 steps, checkpoint through the shards and say ``bye``, and the shard
stops after them, before the rule above fails anything (its state is in the chief's
checkpoint: a shard's own part is never read back).

A shard whose workers do not stop (of an older release, which ignore the ask) and that
stops so, or at the end of ``--drain-seconds``, with ranks still in leaves them
training on a job that lost its shard: it first fails the job on its own stop (the failure
path of :meth:`~distconv.sync.ps.server.Shard._fail`, which answers every held request, and
every later one, with the words), and serves on until each of those ranks has been told (a
request of its worker answered so) or has left, :data:`ANSWER_SECONDS` at most (its
``--drain-seconds`` if shorter): their workers stop at once naming the shard, not after
``1.5 x --timeout`` of silence waiting for answers that would never come. The replies carry
``stopped_shard`` (no ``failed_ranks``: no rank failed), so the workers exit as victims of
another's failure (75, "try again"), and the launcher blames the shard.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.stop_asked import stop_asked_fields

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
#: how long a shard that failed the job on its own stop answers on at most (each worker's next
#: push or gather comes within a step, and ends it sooner once all were told): a worker between
#: requests for longer (a long evaluation) finds it gone, at its own timeout
ANSWER_SECONDS = 3.0
#: how long the socket of a shard that failed the job on its own stop keeps its last replies
#: (that failure, maybe still queued) when it closes, in milliseconds; others drop them at once
TOLD_LINGER_MS = 1000
#: what the workers do next, as a failed shard's words tell them
RESTART_WORDS = "a restart of the job resumes from its newest checkpoint"


def stopped_words(shard: int) -> str:
    """How the failure of ``shard`` stopped on its own SIGTERM with ranks still in begins;
    ``distconv-launch`` finds the shard it blames by these words in a worker's last lines
    (:func:`launcher.drained_shard.stopped_shard_in`)."""
    return f"shard {shard} stopped on its SIGTERM"


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
    _fail: Callable[..., None]

    def __init__(self) -> None:
        self._drain_until: float | None = None  # set at the first signal
        self._drain_began = 0.0
        self._drain_from: dict[int, int] | None = None  # each rank's step then
        self._drain_said = False
        self._failed_on_stop: float | None = None  # when it failed the job on its own stop
        # the ranks an error reply of that failure went to since (not ``_told``: a method of
        # the shard's setup notes, which an attribute of that name hid)
        self._told_ranks: set[int] = set()

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

    def stop_ask_fields(self) -> dict[str, int]:
        """The fields of an ``ok`` reply of this shard that ask its worker to stop (see the
        module): while it drains and the job goes on; none otherwise."""
        if self._drain_until is None or self.failed is not None:
            return {}
        return stop_asked_fields(self.index)

    def drained(self, now: float) -> bool:
        """Whether a draining shard may stop now; logs what it waits for. Where ranks still
        train as it stops, it fails the job first, naming itself and why, and serves on a
        moment to tell them (see the module)."""
        # a rank whose latest hello is a failure note (its fit failed before setup) has no
        # worker in the job to checkpoint: its next fit says hello again
        working = sorted(set(self.accepted_at) - self.left - self.lost - set(self.noted_at))
        if self._failed_on_stop is not None:
            return self._told_all(now, working)
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
            self._fail_on_stop(
                now, f"rank(s) {ranks} trained on {DRAIN_STEPS} steps and {floor:g} s since the "
                "signal: they were not stopped with it",
            )  # fmt: skip
        elif now >= self._drain_until:
            self._fail_on_stop(
                now, f"rank(s) {ranks} were still in after its --drain-seconds "
                f"({self.config.drain_seconds:g} s)",
            )  # fmt: skip
        else:
            if not self._drain_said and now - self._drain_began >= SAY_AFTER_SECONDS:
                self._drain_said = True
                log.warning(
                    "shard %d: stopping once they say bye with rank(s) %s still in (SIGINT, or "
                    "SIGTERM again, stops it now)", self.index, ranks,
                )  # fmt: skip
            return False
        return self._told_all(now, working)

    def _told_all(self, now: float, working: list[int]) -> bool:
        """Whether a shard that failed the job on its own stop may stop now: each rank still
        in has been told (:meth:`note_told`), or :data:`ANSWER_SECONDS` have passed since, or
        its ``--drain-seconds`` if shorter (0: it answered the held requests alone, at once)."""
        window = min(ANSWER_SECONDS, self.config.drain_seconds)
        return set(working) <= self._told_ranks or now >= self._failed_on_stop + window

    def _fail_on_stop(self, now: float, why: str) -> None:
        """Fail the job on this shard's own stop, ``why`` naming the ranks it leaves training:
        every held request and every later one is answered with it (their workers stop at
        once, not at their timeout), and :meth:`drained` serves on a moment for those."""
        self._failed_on_stop = now
        words = f"{stopped_words(self.index)} while {why}; {RESTART_WORDS}"
        # no rank failed (no failed_ranks); stopped_shard makes the workers stop as victims
        # (exit 75, "try again"), the cause named: this shard
        self._fail(words, stopped_shard=self.index)

    def note_told(self, request: dict) -> None:
        """An error reply of the failed job goes to ``request``'s rank: where this shard failed
        it on its own stop, that rank's worker stops on it (not a ``beat``'s reply, which the
        worker's heartbeat thread drops), and :meth:`drained` waits for it no more."""
        rank = request.get("rank")
        if self._failed_on_stop is not None and request.get("op") != "beat" and type(rank) is int:
            self._told_ranks.add(rank)

    def closing_linger_ms(self) -> int:
        """The socket's linger at its close (:data:`TOLD_LINGER_MS`): the last ranks told of a
        failure on this shard's own stop were told just before, and must get their reply."""
        return TOLD_LINGER_MS if self._failed_on_stop is not None else 0
