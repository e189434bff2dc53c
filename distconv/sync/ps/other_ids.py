"""A hello refused for another job's id, and the ranks of this job left waiting for that rank.

A shard serves one job: the one its ``--job-id`` names. A request naming another id is refused
before anything else is read (:meth:`~distconv.sync.ps.handlers.RequestHandlers._check_sender`,
``"refused": "job"``), and so are that worker's later requests, its ``bye`` too: the shard never
heard it close, and the ranks of this job waiting in a gather (or a sync step) for its rank
waited out ``--timeout``, then stopped as on a peer's failure (exit 75), naming the timeout.

The id is what tells jobs apart, so a worker of another id never takes the place of a worker of
this job: a stray of another job (its own shards' address mistyped) claiming a rank whose worker
is here must not stop a job that can go on. It explains a wait only where this job has no worker
of that rank: none said ``hello`` here, or the latest said ``bye`` before the refusal (a job
started again against shards that kept running), and the refusal is no older than ``--timeout``
(one from before, a stray while no run of the job was on the shard, is forgotten). Then the
ranks that wait for it hear at once that it was refused as another job, as a refusal of the job
(a ``JobRefused``: one line and exit 1 under ``run_main``), and the refused worker keeps its own
refusal. A rank outside the worker count, or one declared lost (nothing waits for it), changes
nothing; nor does a worker of this job that went silent and was replaced by one of another id:
the shard cannot tell it from one busy in its step, so the timeout decides, and its message
names the refusal (one no older than ``--timeout`` before the wait began).
"""

from __future__ import annotations

import math
import time
from typing import Any

from distconv.sync.ps.job_hello import REFUSED_JOB


class OtherJobIds:
    """The other-id side of :class:`~distconv.sync.ps.server.Shard` (whose state it shares)."""

    config: Any
    failed: str | None
    requests: int
    waiting: dict[str, Any]
    gathers_held: set[str]
    hello_at: dict[int, int]
    accepted_at: dict[int, int]
    bye_at: dict[int, int]
    left: set[int]
    #: per rank of this job's count, when a hello naming another job's id was last refused for
    #: it (the shard's count of requests, which the refusal advances), the refusal's words,
    #: and its time.monotonic()
    other_ids: dict[int, tuple[int, str, float]]

    def _note_other_id(self, header: dict[str, Any], why: str) -> None:
        """A request naming another job's id was refused with ``why``: where it is a ``hello``
        for a rank of this job's count, remember it, and fail what now waits for that rank
        if this job has no worker of it (:meth:`_check_other_ids`)."""
        rank = header["rank"]
        if header["op"] != "hello" or not 0 <= rank < self.config.workers:
            return  # a rank outside the count never counted: nobody waits for it
        self.requests += 1  # after the rank's latest accepted hello or bye, never with it
        self.other_ids[rank] = (self.requests, why, time.monotonic())
        self._check_other_ids()

    def _other_id(self, rank: int, since: float = -math.inf) -> str | None:
        """The words of the latest refusal of another job's hello for ``rank`` since its latest
        accepted hello, and at ``since`` (a ``time.monotonic()``) or later; else None."""
        when, why, at = self.other_ids.get(rank, (-1, None, 0.0))
        return why if when > self.accepted_at.get(rank, -1) and at >= since else None

    def _vacant(self, rank: int) -> str | None:
        """The refusal's words where ``rank`` has no worker of this job (:meth:`_other_id`, and
        none accepted here, or the latest said bye before it), else None; None too for a
        refusal older than ``--timeout``: a worker of another id that said hello that long
        before is none of a run starting now (its ranks start within the timeout of each
        other), but a stray from before it (shards kept running between two runs of the job),
        and the run's own worker of the rank may yet come."""
        why = self._other_id(rank, time.monotonic() - self.config.timeout)
        if why is None or rank not in self.accepted_at:
            return why
        closed = rank in self.left and self.bye_at.get(rank, -1) < self.other_ids[rank][0]
        return why if closed else None

    def _check_other_ids(self) -> None:
        """Fail the job, as a refusal of it, when a request of this job's current run is held
        waiting for a rank of its count (not lost) that only a worker of another job claimed
        (:meth:`_vacant`); after a request that may be held, and at such a refusal."""
        if not self.other_ids or self.failed:
            return
        for rank in sorted(self.other_ids.keys() & self._live()):
            why = self._vacant(rank)
            if why is None:
                continue
            doing = self._waiting_for(rank)
            if doing:
                self._fail(  # led by the refusal's words, which the launcher reads
                    f"{why}; no worker of this job holds rank {rank} here: {'; '.join(doing)}",
                    **REFUSED_JOB,  # no rank failed: the jobs' ids do not fit
                )
                return

    def _refused_instead(self, gone: list[int]) -> bool:
        """Whether a sync step the ``gone`` ranks left behind failed as a refusal of the job
        instead (:meth:`_check_other_ids`, run here): a worker of another id claimed one of
        them since its bye, and none failed on its own (``_blamed``: the failure is then its,
        and the refused stray goes away). Checked first, the step said only that the rank
        closed, and dropped the cause that stops any restart of it."""
        if self._blamed(gone) or not any(self._vacant(rank) for rank in gone):
            return False
        self._check_other_ids()
        return self.failed is not None

    def _waiting_for(self, rank: int) -> list[str]:
        """What each rank held here waits in for ``rank``: a gather or a sync step that lacks
        its part, left out a request from before its own rank's latest hello of a new run."""
        doing: dict[int, str] = {}
        for key, held in self.waiting.items():
            if rank in held.by_rank:
                continue
            for q in sorted(held.by_rank):
                if q in doing or held.arrived.get(q, 0) < self.hello_at.get(q, -1):
                    continue
                push = "" if key in self.gathers_held else " for its push"
                doing[q] = f"{self._who(q)} waits in {held.what}{push}"
        return [doing[q] for q in sorted(doing)]
