"""What a shard holds of the job it serves, apart from what it keeps for its whole life.

A shard's life holds its settings, its socket, its stats (counted since it started:
docs/protocol.md, "Stats") and its count of requests. Everything else is of one job: the job
the first accepted ``hello`` bound, the seeded blocks and their optimizer state, the step
counters, the requests held, which rank said what and when (hellos, byes, failure notes,
abandoned steps, refusals), the ranks gone or lost, and the failure, if any.
:meth:`JobState._clear_job` sets all of it as a shard that has just started holds it.
"""

from __future__ import annotations

from typing import Any

from distconv.optim import Optimizer
from distconv.sync.ps.blocks import ParamSpec
from distconv.sync.ps.incarnations import Incarnation
from distconv.sync.ps.job_hello import HelloJob
from distconv.sync.ps.processes import ProcessWatch
from distconv.sync.ps.setup_notes import SetupNote
from distconv.sync.ps.state import _Block, _Waiting
from distconv.sync.ps.values import ValueStore


class JobState:
    """The job side of :class:`~distconv.sync.ps.server.Shard`'s state (a mixin)."""

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
        self.bye_at: dict[int, int] = {}
        self.bye_error: dict[int, str | None] = {}  # what each rank's latest bye said it failed on
        self.bye_blames: dict[int, list[int]] = {}  # the ranks its PeerFailed named (the cause)
        self.abandoned: dict[int, tuple[int, str | None, list[int]]] = {}  # (gathers.py)
        self.met_at = 0  # the count when a gather was last answered
        self.seeded_at = -1  # the count when the latest seed was installed (runs.py)
        self.ended_run: tuple[int, int, str] | None = None  # a run a restart ended (runs.py)
