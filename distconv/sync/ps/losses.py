"""Which waits end a parameter-server job, or lose a rank (async mode), and how they say so.

A shard's :meth:`~WorkerLosses._check_timeouts` runs between batches of requests: a worker on
its host whose process ended (:mod:`~distconv.sync.ps.processes`), a rank silent past
``--timeout`` (async mode: no request, no heartbeat), and a held request (a sync step, a
gather) older than the timeout fail the job naming the ranks, or, in async mode with
``--on-worker-loss continue``, lose them and go on (never rank 0, the chief); a start-up job
check that ranks are only late to is answered instead, failing nothing
(:mod:`~distconv.sync.ps.late_job_check`). The rules are in docs/protocol.md, "Timeouts and
failures".
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from distconv.straggler_words import RAISE_TIMEOUT, sent_nothing_text, silent_text
from distconv.sync.ps.processes import WORKER_ENDED, WORKER_STOPPED, ProcessWatch
from distconv.sync.ps.stuck import held_words

log = logging.getLogger("distconv.pserver")

#: how long the shard reads its queue before a look at its workers' processes, in seconds, once
#: it has read a batch (BATCH requests, whatever they take) if that many are queued (a bound: a
#: steady stream of requests must not keep the loop from its timeouts and its stop)
READ_BEFORE_LOOK = 0.1
_CHIEF = "rank 0 writes the checkpoints and the metrics, so the job cannot go on without it"
_OTHERS_ONLY = "--on-worker-loss continue goes on without the other ranks only"
#: why losing rank 0 stops the job even with ``--on-worker-loss continue``
CHIEF_LOST = (
    f"{_CHIEF} ({_OTHERS_ONLY}; if it was only paused or busy for longer than --timeout, raise it)"
)
#: the same, where rank 0's latest hello was a failure note (:mod:`~distconv.sync.ps.setup_notes`):
#: its fit failed before setup, which no longer ``--timeout`` would have waited out
CHIEF_NOTED = f"{_CHIEF} ({_OTHERS_ONLY})"

#: why an asynchronous shard fails where every rank went silent at once
NO_WORKER_HEARD = (
    "no worker was heard from for {seconds:g} s (a network partition, or every worker stopped?)"
)


class WorkerLosses:
    """The loss side of :class:`~distconv.sync.ps.server.Shard` (whose state it shares)."""

    config: Any
    processes: ProcessWatch
    failed: str | None
    waiting: dict[str, Any]
    gathers_held: set[str]
    left: set[int]
    lost: set[int]
    last_seen: dict[int, float]
    hello_at: dict[int, int]
    refused_at: dict[int, tuple[int, int | None]]
    requests: int
    noted_at: dict[int, tuple[str, int]]
    params: list[Any]  # the shard's ParamSpecs, by index: a held push names its parameter
    _noted_process_ended: Callable[[int, int], None]
    _standing_note: Callable[[int], str | None]
    #: :meth:`~distconv.sync.ps.late_job_check.LateJobCheck._answered_late`
    _answered_late: Callable[[str, list[int], str, set[int]], bool]

    def _check_timeouts(self, now: float) -> None:
        """Fail the job, or lose ranks (async), for every wait past ``--timeout``: first the
        ranks whose process on this host ended (:mod:`~distconv.sync.ps.processes`) and those
        silent that long (their loss may answer a gather), then the held requests."""
        if self.processes.look_due(now):  # a bye queued behind others says a rank closed
            self._drain(until=time.monotonic() + READ_BEFORE_LOOK)
            now = max(now, time.monotonic())  # the look after the read: the next is LOOK_EVERY on
        for rank, pid in self.processes.ended(self._live() - self.left, now):
            if rank in self.noted_at:  # its fit failed before setup: its end is no crash
                self._noted_process_ended(rank, pid)
                continue
            gone = f"{self._who(rank)}: its process (pid {pid}, on this host) {WORKER_ENDED}"
            if self.config.mode == "sync":  # blamed, beside the mismatch a rank left on, as
                lead, fields = self._refusal_lead(self._missed())  # as at the timeout
                self._fail(f"{lead}{gone}", [rank], **fields)
            else:
                self._lose(rank, gone)
            if self.failed:
                return
        limit = self.config.timeout
        if self.config.mode == "async":
            # where lost ranks are let go (--on-worker-loss continue), each silent one is
            # lost as before, and the job stops once none is left (_lose says why)
            if self.config.on_worker_loss == "fail" and self._fail_on_all_silent(now, limit):
                return
            for rank, seen in list(self.last_seen.items()):
                if rank in self.left or rank in self.lost or now - seen <= limit:
                    continue
                said = silent_text(self._who(rank), limit) + self._stopped([rank])
                self._lose(rank, said, way_out=RAISE_TIMEOUT)
                if self.failed:
                    return
        for key, waiting in list(self.waiting.items()):
            if key not in self.waiting or now - waiting.since <= limit:
                continue  # answered meanwhile (a rank lost above), or within the timeout
            missing = sorted(self._live() - set(waiting.by_rank))
            held = held_words(waiting.what, key, self.params)
            if not self._stragglers(key, missing):
                # the silent ranks failed; of those that said bye, only one that failed did
                gone = self.left.intersection(missing)
                failed = set(missing) - gone | set(self._blamed(gone))
                named = ", ".join(self._who(r) for r in missing)
                why = self._why(missing, key)
                said = f"{sent_nothing_text(named, held, limit)}{why}"
                if self._answered_late(key, missing, said, failed):
                    continue  # the job check, which they are only late to: nothing failed
                lead, fields = self._refusal_lead(missing)  # gone on different jobs, none failed
                # led by those words, as a step or a gather a bye left: a refusal; where the
                # shard knows nothing else of them, they may only be slow: the way out
                way_out = "" if why or lead else f"{self._stopped(missing)}; {RAISE_TIMEOUT}"
                self._fail(f"{lead}{said}{way_out}", failed, **fields)
                return
            for rank in missing:  # a noted rank that had joined: its note's words too
                why = self._why([rank], key)
                words = sent_nothing_text(self._who(rank), held, limit)
                words += why or self._stopped([rank])
                self._lose(rank, words, way_out="" if why else RAISE_TIMEOUT)
                if self.failed:
                    return

    def _fail_on_all_silent(self, now: float, limit: float) -> bool:
        """Fail the job, and say so, where no live rank (of several) was heard from for
        ``limit`` seconds: a link down or every worker stopped, not one rank's silence (the
        first rank checked was blamed, ``rank 0 ... silent for 10 s``, and the launcher
        with it). Whether it did."""
        live = sorted(r for r in self.last_seen if r not in self.left and r not in self.lost)
        if len(live) < 2 or any(now - self.last_seen[r] <= limit for r in live):
            return False
        named = ", ".join(self._who(r) for r in live)
        self._fail(f"{NO_WORKER_HEARD.format(seconds=limit)}: {named}{self._stopped(live)}", live)
        return True

    def _missed(self) -> set[int]:
        """The live ranks some held request waits for: those whose leaving may explain it."""
        live = self._live()
        return {r for held in self.waiting.values() for r in live - set(held.by_rank)}

    def _stragglers(self, key: str, missing: list[int]) -> bool:
        """Whether gather ``key``'s timeout loses the ``missing`` ranks rather than failing
        the job: in async mode with ``--on-worker-loss continue``, when each of them said
        hello (of a new run, and none was refused since) before the gather began (not one
        late to start: at the start-up job check shard 0 tells the ranks waiting that such a
        rank is late, where it is only late, :mod:`~distconv.sync.ps.late_job_check`, and
        any other gather's timeout fails the job), has not closed, and waits in no other
        gather (ranks in different gathers can never meet). Such a rank lives (a silent one
        was lost before the held requests were looked at) but stays away from the others, as
        a silent one does."""
        if self.config.mode == "sync" or self.config.on_worker_loss == "fail":
            return False
        began = self._began(key)
        elsewhere = self._in_other_gathers(key)
        return all(
            self._joined_before(r, began) and r not in self.left and r not in elsewhere
            for r in missing
        )

    def _began(self, key: str) -> int:
        """The shard's count of requests when held request ``key`` began (its first arrived),
        or now where none is held under it yet."""
        held = self.waiting.get(key)
        return min(held.arrived.values(), default=self.requests) if held else self.requests

    def _joined_before(self, rank: int, began: int) -> bool:
        """Whether ``rank``'s latest hello of a new run was accepted before the shard's count
        ``began`` (a gather's start), and none of it refused since."""
        accepted = self.hello_at.get(rank, -1)
        return 0 <= accepted < began and self.refused_at.get(rank, (-1,))[0] < accepted

    def _in_other_gathers(self, key: str) -> dict[int, str]:
        """The ranks held in a gather other than held request ``key``, each with its tag."""
        return {
            rank: self.waiting[k].what
            for k in self.gathers_held
            if k != key
            for rank in self.waiting[k].by_rank
        }

    def _why(self, missing: list[int], key: str) -> str:
        """What the ``missing`` ranks of held request ``key`` do instead, where the shard knows:
        wait in another gather, or closed, or failed before setup (its failure note's words,
        where its latest hello was one that still stands: not one of the start of the job
        before a launcher's restart); and whether a worker of another job's id claimed the rank
        since its latest hello here (its worker of this job went silent, replaced: the shard
        cannot tell it from one busy in its step, :mod:`~distconv.sync.ps.other_ids`) no longer
        than ``--timeout`` before the wait began; appended to the timeout's message.
        An older refusal is a stray's from before this run (shards kept running between runs),
        which said nothing of a rank that never came."""
        doing = {r: self._closed(r) for r in self.left}  # a worker of it may still wait, below
        doing.update({r: f"waits in {tag}" for r, tag in self._in_other_gathers(key).items()})
        said = [f"rank {r} {doing[r]}" for r in missing if r in doing]
        # its latest hello was a failure note (setup_notes.py): its words, not silence alone;
        # not a note of the start before a launcher's restart, which blamed this start's worker
        said += [n for r in missing if r not in doing and (n := self._standing_note(r))]
        since = self.waiting[key].since - self.config.timeout  # its ranks start within that
        said += [
            f"a worker of {why}"  # rank R names another job id than the shard: ...
            for r in missing
            if (why := self._other_id(r, since)) is not None
        ]
        return f" ({'; '.join(said)})" if said else ""

    def _stopped(self, ranks: list[int]) -> str:
        """``; its process (pid 7, on this host) is stopped (SIGSTOP, ...)`` for each of the
        silent ``ranks`` whose process on this host is stopped (``rank 1's process`` where
        several are named: :meth:`~distconv.sync.ps.processes.ProcessWatch.stopped`): why it
        said nothing; "" where none is known to be."""
        said = ""
        for rank in ranks:
            if (pid := self.processes.stopped(rank)) is not None:
                whose = "its" if len(ranks) == 1 else f"rank {rank}'s"
                said += f"; {whose} process (pid {pid}, on this host) {WORKER_STOPPED}"
        return said

    def _lose(self, rank: int, message: str, way_out: str = "") -> None:
        """Async: ``rank`` said nothing for the timeout (no request, no heartbeat: its process
        is gone or stopped), or a gather waited for it that long. Fail the job (``way_out``
        after ``message``, where a longer wait may have saved it: :data:`RAISE_TIMEOUT`), unless
        ``--on-worker-loss continue`` and it is not rank 0, the chief, which writes the
        checkpoints and the metrics: without it the others would train on with nothing saved
        (where its latest hello was a failure note that still stands, no advice to raise the
        timeout follows)."""
        if self.config.on_worker_loss == "fail":
            self._fail(f"{message}; {way_out}" if way_out else message, [rank])
            return
        if rank == 0:
            noted = self._standing_note(rank) is not None
            self._fail(f"{message}: {CHIEF_NOTED if noted else CHIEF_LOST}", [0])
            return
        log.warning(
            "shard %d: %s; --on-worker-loss continue: going on without it", self.index, message
        )
        self.lost.add(rank)
        self.processes.forget(rank)
        for key in list(self.gathers_held):
            self._finish_gather(key)
        self._check_stuck()  # the ranks left may wait in different gathers
