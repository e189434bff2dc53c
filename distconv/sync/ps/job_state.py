"""What a shard holds of the job it serves, and the next job it serves once that one ended.

A shard's life holds its settings, its socket, its stats (counted since it started:
docs/protocol.md, "Stats") and its count of requests. Everything else is of one job: the job
the first accepted ``hello`` bound, the seeded blocks and their optimizer state, the step
counters, the requests held, which rank said what and when (hellos, byes, failure notes,
abandoned steps, refusals), the ranks gone or lost, and the failure, if any.
:meth:`JobState._clear_job` sets all of it as a shard that has just started holds it.

A shard you start yourself stays up after its workers' ``bye`` (docs/operations.md). It kept the
job the first accepted hello bound for good, so the next run on it was refused as another job: a
``--resume --epochs 2`` after ``--epochs 1`` (the job's description holds its epochs), or a
corrected worker after one started with a typo that refused itself (its hello had bound the
job), told that it and a rank of its own run ran different jobs; only a restart of the shards
let it in. So once the bound job has ended (:meth:`JobState._job_over`: every rank accepted
since it was bound said ``bye`` of that run, even one carrying an error, no request is held, and
the shard has not failed), the next ``hello`` finds the shard as a restarted one would: it binds
the job afresh, and that job's rank 0 seeds it (a resume with its checkpoint's values and
optimizer state). Until then, the shard holds the ended job's blocks as before (a stop writes
its last part of them). A failed shard keeps its failure: it answers the next job's hello with
it, in words that say so and ask for a restart of the shards, or of their pods under Kubernetes
(:meth:`JobState._failed_words`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from typing import Any

from distconv.optim import Optimizer
from distconv.sync.ps.blocks import ParamSpec
from distconv.sync.ps.incarnations import Incarnation
from distconv.sync.ps.job_hello import REFUSED_JOB, HelloJob
from distconv.sync.ps.processes import ProcessWatch
from distconv.sync.ps.setup_notes import SetupNote
from distconv.sync.ps.state import _Block, _Refused, _Waiting
from distconv.sync.ps.values import ValueStore

log = logging.getLogger("distconv.pserver")

#: the way out of a failed shard, said to the hello it refuses: the shards' restart, which under
#: Kubernetes is a deletion of their pods (the StatefulSet starts them afresh; a failed shard
#: is restarted by its liveness probe only after about 90 s: docs/kubernetes.md)
RESTART_SHARDS = (
    "restart the shards (distconv pserver; on Kubernetes, delete the job's pserver pods), "
    "then the workers"
)

#: how many of a rank's latest runs (the run ids its hellos carried) a shard remembers, of the
#: job it serves and of the jobs before (:class:`RecentRuns`): a stray, a worker alive beside
#: its rank's newer one (a pod evicted while its replacement starts), is of one of them; a run
#: further back is of a worker long gone (a crash loop's, each replaced by the next)
RUNS_KEPT = 8


class RecentRuns:
    """``(rank, run)`` of the :data:`RUNS_KEPT` runs heard last of each rank, a run heard
    again counted as heard last. One entry per hello's run, kept for as long as the job (or,
    once it ended, the shard) lasted, grew with every restart of a rank in a crash loop, or
    taken back each time (async, ``--on-worker-loss continue``), and with every job a shard
    started by hand served. A run forgotten so is of no job before: a worker of it still
    alive is taken at its word by the next job until its rank says hello there."""

    def __init__(self) -> None:
        self._runs: dict[int, dict[int, None]] = {}  # rank -> its runs, the latest last

    def add(self, rank: int, run: int) -> None:
        """``rank``'s ``run`` heard now: the rank's oldest run beyond :data:`RUNS_KEPT` is
        forgotten."""
        runs = self._runs.setdefault(rank, {})
        runs.pop(run, None)
        runs[run] = None
        while len(runs) > RUNS_KEPT:
            del runs[next(iter(runs))]

    def update(self, heard: Iterable[tuple[int, int]]) -> None:
        """Each ``(rank, run)`` of ``heard``, in its order, heard now."""
        for rank, run in heard:
            self.add(rank, run)

    def __contains__(self, worker: object) -> bool:
        if not isinstance(worker, tuple) or len(worker) != 2:
            return False
        rank, run = worker
        return run in self._runs.get(rank, {})

    def __iter__(self) -> Iterator[tuple[int, int]]:
        """Every ``(rank, run)`` kept, each rank's oldest first."""
        return ((rank, run) for rank, runs in self._runs.items() for run in runs)

    def __len__(self) -> int:
        return sum(len(runs) for runs in self._runs.values())


class JobState:
    """The job side of :class:`~distconv.sync.ps.server.Shard`'s state (a mixin placed before
    :class:`~distconv.sync.ps.gathers.ShardGathers`, whose ``bye`` it sees first, and after
    :class:`~distconv.sync.ps.setup_notes.SetupNotes`, which keeps a failure note's ``bye``
    from it)."""

    config: Any
    index: int
    requests: int
    _closed: Callable[[int], str]  # how a rank that said bye left (runs.py)

    @cached_property
    def runs_ended(self) -> RecentRuns:
        """(rank, run id) of the hellos the jobs before heard, each rank's latest runs
        (:class:`RecentRuns`), kept for the shard's life: a worker of such a run that did not
        say ``bye`` (one whose rank started again, or whose hello was refused) may still send
        its requests once the next job has bound the shard, before its rank's hello there,
        where no run of its rank tells it apart."""
        return RecentRuns()

    def _heard_run(self, rank: int, run: int | None) -> None:
        """A hello of ``rank``'s ``run``: a run of this job (:attr:`runs_ended` once over)."""
        if run is not None:
            self.job_runs.add(rank, run)

    def _of_ended_job(self, header: dict[str, Any]) -> bool:
        """Whether ``header`` is of a run a job before heard, its rank not said ``hello`` of
        this job yet (once it has, a run before is told apart by its run id)."""
        rank, run = header["rank"], header.get("run")
        return rank not in self.run_of and (rank, run) in self.runs_ended

    def _of_current_run(self, header: dict[str, Any]) -> bool:
        """As :meth:`RunChecks._of_current_run`, but a request of a job before is of none of
        this job's runs: its ``bye`` closes no rank, it says no rank is alive."""
        if self._of_ended_job(header):
            return False
        return super()._of_current_run(header)  # type: ignore[misc]

    def _check_run(self, header: dict[str, Any]) -> None:
        """Refuse a request of a job before (:meth:`_of_ended_job`) in words that say so: taken
        at its word, a gather of it was held as its rank's in this job, and failed it at once
        (the ranks at different points of the job), a stray's push or seed joined it."""
        if self._of_ended_job(header):
            raise _Refused(
                f"rank {header['rank']}: this worker's {header['op']} is of a job before on "
                "this shard, which ended (its workers said bye) before the next one bound the "
                "shard: refused"
            )
        super()._check_run(header)  # type: ignore[misc]

    def _op_bye(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        """A ``bye`` of the run of its rank's latest accepted hello: that rank's part in the
        job is over (:meth:`_job_over`). Not one of another worker of the rank (a run before,
        or a hello refused since, whose worker may be a stray beside the one still in)."""
        rank = header["rank"]
        if rank in self.accepted_at and self._of_current_run(header):
            self.closed_at[rank] = self.requests
        super()._op_bye(ident, header, arrays)  # type: ignore[misc]

    def _job_over(self) -> bool:
        """Whether the bound job has ended: every rank accepted since it was bound said
        ``bye`` of that run, cleanly or on an error (a rank lost, async with ``--on-worker-loss
        continue``, said none: its worker may still push), no request is held, and the shard
        has not failed."""
        if self.job is None or self.failed or self.waiting:
            return False
        return all(self.closed_at.get(r, -1) > at for r, at in self.accepted_at.items())

    def _next_job(self) -> None:
        """Before a ``hello``: where the bound job has ended (:meth:`_job_over`), hold it no
        more, as a restarted shard: the hello binds the job afresh."""
        if self._job_over():
            errors = self._bye_errors()
            log.log(
                logging.WARNING if errors else logging.INFO,
                "shard %d: the job before ended%s: the next hello binds the job afresh",
                self.index,
                f" on errors (its workers said bye, {errors})"
                if errors
                else " (its workers said bye)",
            )
            self._unbind()

    def _unbind(self) -> None:
        """Hold the bound job no more, as a restarted shard: the next hello binds the job
        afresh, and a late request of a run it heard is refused as a job before's."""
        self.runs_ended.update(self.job_runs)
        self._clear_job()

    def _bye_errors(self) -> str:
        """The errors the byes of the job's ranks carried, as ``rank 0 closed on "..."; rank
        1 closed on "..."``, or ``""`` where each left cleanly: a job whose workers left on
        errors (a shard that never came, a rank that failed) did not end as one that ran
        its epochs, and its shard's log must not read as if it had."""
        failed = [r for r in sorted(self.accepted_at) if self.bye_error.get(r)]
        return "; ".join(f"rank {r} {self._closed(r)}" for r in failed)

    def _failed_words(self, header: dict[str, Any]) -> str:
        """What a failed shard answers the request ``header`` with: its failure; for a ``hello``
        (the next job's, or a worker restarted into a job that failed), that it failed before
        it, and that only a restart of the shards serves a job again: led by that cause and
        the way out where the hello is surely of a worker that came after the failure
        (:meth:`_failed_before_hello`, by the hello's rank), which blamed no rank of its own
        job. Not "an earlier job": such a worker may be of the job that failed, restarted (a
        kubelet's restart of its container), as of a ``--resume``."""
        if header["op"] != "hello":
            return self.failed or ""
        if self._failed_before_hello(header["rank"]):
            return (
                f"this shard failed before this worker's hello: {RESTART_SHARDS}; a failed "
                f"shard serves no worker until it is restarted (its failure: {self.failed})"
            )
        return (
            f"{self.failed} (a job failed so on this shard before this hello: a failed shard "
            f"serves no other job until it is restarted; {RESTART_SHARDS})"
        )

    def _failed_reply_fields(self, header: dict[str, Any]) -> dict[str, Any]:
        """The fields beside :meth:`_failed_words`: for a hello of a worker that began after
        the failure (:meth:`_failed_before_hello`), a refusal of the job naming no rank in
        ``failed_ranks``, so that every worker refused so exits as on a refused start (1), none
        as the victim (75) of a rank that failed before its hello; else the
        failure's own (:meth:`~distconv.sync.ps.server.Shard._failed_fields`)."""
        if header["op"] == "hello" and self._failed_before_hello(header["rank"]):
            return dict(REFUSED_JOB)
        return self._failed_fields()  # type: ignore[attr-defined]

    def _failed_before_hello(self, rank: int) -> bool:
        """Whether a hello of ``rank`` that finds the shard failed is surely of a worker that
        came after the failure: a worker of its rank had been accepted in the job that failed,
        so this one is not its first, late. (Where its rank had not said hello, it may be that
        rank's worker, late in the job that failed: the failure of the ranks it names is its
        cause.) A rule of the whole job (every rank accepted) told a resume's rank 0 that its
        rank 1, which the failed job never heard, had failed, and it exited 75."""
        return rank in self.accepted_at

    def _clear_job(self) -> None:
        """Hold no job: no job bound, nothing seeded, no rank heard of, no failure."""
        self.params: list[ParamSpec] = []
        self.blocks: dict[int, _Block] = {}
        self.by_param: dict[int, list[int]] = {}
        self.store = ValueStore({})  # the blocks' values, once seeded
        self.seed_id: int | None = None  # random, new at each seed (a stats reply's ``seed``)
        self.optimizer: Optimizer | None = None
        self.job: HelloJob | None = None  # the first accepted hello's (see _op_hello)
        self.job_rank = 0  # the rank whose hello set it (see different_jobs)
        self.failed: str | None = None
        self.failed_ranks: list[int] = []  # the ranks whose failure failed the job, if any
        self.failed_fields: dict[str, Any] = {}  # its replies' other fields (refused: job)
        self.setup_notes: dict[int, SetupNote] = {}  # ranks that could not set up
        self.noted_run: dict[int, int | None] = {}  # (setup_notes.py)
        self.told_at: dict[int, int] = {}  # rank -> when last told of a note (setup_notes.py)
        self.knows_of: dict[int, set[int]] = {}  # rank -> the noted ranks it knows of (idem)
        self.noted_at: dict[int, tuple[str, int]] = {}  # rank -> its note's words, when
        self.noted_gone: dict[int, str] = {}  # rank -> why: its noted process ended
        self.incarnations: dict[int, Incarnation | None] = {}  # rank -> its latest hello's
        self.completed: dict[int, int] = {}  # param -> last step applied (sync)
        self.pushed: dict[int, dict[int, int]] = {}  # rank -> param -> last step pushed (async)
        self.top_step = -1  # the highest step an update was applied for since the seed (probes)
        self.waiting: dict[str, _Waiting] = {}  # "push:<param>" or "gather:<tag>"
        self.gathers_held: set[str] = set()  # the gather keys in ``waiting``, looked up per push
        self._seeding: Any = None  # a seed whose parts are still arriving
        self.hosts: dict[int, str] = {}
        self.last_step: dict[int, int] = {}
        self.last_seen: dict[int, float] = {}
        self.left: set[int] = set()
        self.lost: set[int] = set()
        self.processes = ProcessWatch()  # the workers' processes on this host
        #: the count of requests at each rank's latest hello (of a new run; accepted at all)
        #: and bye: which run of a restarted worker a held request or a bye belongs to (see
        #: _check_stuck)
        self.hello_at: dict[int, int] = {}
        self.accepted_at: dict[int, int] = {}
        #: per rank, when its latest hello was refused (another job's description), its run id
        self.refused_at: dict[int, tuple[int, int | None]] = {}
        #: per rank whose latest refused hello was another job's (of a new run, or a second
        #: setup of its worker), when, and what differs: the cause the ranks it leaves waiting
        #: are told first (_other_job); one refused for its host has none here, failed on its
        #: own, and is blamed for its bye's error (_blamed)
        self.other_job: dict[int, tuple[int, str]] = {}
        self.other_ids: dict[int, tuple[int, str, float]] = {}  # another job's id (other_ids)
        self.run_of: dict[int, int | None] = {}  # the run id of each rank's latest accepted hello
        self.job_runs = RecentRuns()  # (rank, run) of each rank's latest hellos (_heard_run)
        self.bye_at: dict[int, int] = {}
        self.closed_at: dict[int, int] = {}  # rank -> the count at its accepted run's bye
        self.bye_error: dict[int, str | None] = {}  # what each rank's latest bye said it failed on
        self.bye_blames: dict[int, list[int]] = {}  # the ranks its PeerFailed named (the cause)
        self.abandoned: dict[int, tuple[int, str | None, list[int]]] = {}  # (gathers.py)
        self.met_at = 0  # the count when a gather was last answered
        self.seeded_at = -1  # the count when the latest seed was installed (runs.py)
        self.ended_run: tuple[int, int, str] | None = None  # a run a restart ended (runs.py)
