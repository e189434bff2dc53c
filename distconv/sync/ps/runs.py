"""Which run of its rank a request comes from, and which requests say that a rank is alive.

Each worker (a ``PServerSync``) draws a run id when it is made and sends it with every request.
A rank's run on a shard is that of its latest accepted ``hello``: a request of another run comes
from a worker of the run before, still alive beside its restart (a pod evicted while its
replacement starts), and must not join the new run's steps and collectives, nor keep its rank
alive in the shard's eyes. The rules are in docs/protocol.md ("Common fields", "Timeouts and
failures").

A rank's hello of a new run also ends the run it leaves, where that run was seeded and its
worker said no ``bye`` (killed, out of memory, a crashed container restarted alone): in sync
mode the other ranks of that run wait for the dead worker's pushes and collectives, in async
mode they reach their next collective while the new worker waits in its start-up gather, and
neither wait can ever be answered. They are told at once, each held request answered and each
later one refused, naming the restart, so that every worker restarts and the job resumes from
its checkpoint together with the restarted rank, instead of failing at the shard's
``--timeout`` (:meth:`RunChecks._end_run_before`). Where another process claims a rank whose
worker still lives, its hello is no restart: :mod:`~distconv.sync.ps.duplicates`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from distconv.sync.ps.duplicates import DuplicateHellos
from distconv.sync.ps.state import _Refused, _Waiting

if TYPE_CHECKING:
    from distconv.sync.ps.job_state import RecentRuns

log = logging.getLogger("distconv.pserver")


class RunChecks(DuplicateHellos):
    """The run side of :class:`~distconv.sync.ps.server.Shard` (whose state it shares), and how
    its messages name a rank."""

    index: int
    hosts: dict[int, str]
    run_of: dict[int, int | None]  # the run id of each rank's latest accepted hello
    accepted_at: dict[int, int]
    refused_at: dict[int, tuple[int, int | None]]
    other_job: dict[int, tuple[int, str]]
    job_runs: RecentRuns  # (rank, run) of each rank's latest hellos of this job, taken or not
    last_seen: dict[int, float]
    last_step: dict[int, int]
    bye_error: dict[int, str | None]
    blocks: dict[int, Any]  # the seeded blocks, by id (none before a seed)
    hello_at: dict[int, int]
    left: set[int]
    lost: set[int]
    waiting: dict[str, _Waiting]
    gathers_held: set[str]
    #: the shard's count of requests when the latest seed was installed (-1: none yet)
    seeded_at = -1
    #: the run a rank's restart ended (:meth:`_end_run_before`): the seed count before which
    #: its ranks said hello, the rank that started again, and the words each of them is told
    ended_run: tuple[int, int, str] | None = None

    def _check_run(self, header: dict[str, Any]) -> None:
        """Refuse a request of another run than its rank's latest accepted ``hello`` (both
        carrying a run id): it comes from a worker of the run before, alive beside its
        restart, and would join the new run's steps and collectives. Refuse too a request of
        a run that another rank's restart ended (:meth:`_end_run_before`)."""
        if not self._of_current_run(header):
            rank, run = header["rank"], header["run"]
            refused = _Refused(
                f"{self._restarted(rank)}: this worker's {header['op']} is of the run before, "
                "refused"
            )
            # logged by the handler, which names the peer and bounds the lines of a replay
            refused.log_line = f"{an(header['op'])} of rank {rank}'s run {run} refused"
            raise refused
        if self.ended_run is not None and self._of_ended_run(header["rank"]):
            _, restarted, why = self.ended_run
            raise _Refused(
                f"{why}; this worker's {header['op']} is refused", failed_ranks=[restarted]
            )

    def _end_run_before(self, rank: int, run: int | None) -> None:
        """Before ``rank``'s hello of ``run`` is taken, end the run its worker leaves, where
        only a restart of that worker explains the hello: the hello and the one before carry
        run ids that differ (not a second ``setup``, nor a worker without one), that run was
        seeded since the worker's latest accepted hello, a second ``setup``'s too (past its
        start-up: the other ranks' steps and collectives wait for that worker now), its
        worker said no ``bye`` since (a bye's own rules decide then), and its rank was not
        lost (async, ``--on-worker-loss continue``: the job goes on without it, as chosen;
        shard 0 refuses its hello, and another shard, which takes it in, must not stop the
        ranks that go on). Every request held of a rank whose latest accepted hello came
        before that seed is answered at once naming the restart, and
        so is every later one (:meth:`_check_run`): their workers stop (``PeerFailed`` blaming
        ``rank``: exit 75) and restart, and the rank's new worker, waiting in its start-up
        gather, meets theirs; so does a worker that sets up again (a script that fits again,
        told or not: a second ``setup`` since the seed is no longer of the run). Before, the
        job failed at the shard's ``--timeout``, and only a restart of the shards took the
        workers back. A restart before the seed is taken in as it was: the others are still in
        their start-up gather, which the new worker joins."""
        if not self._would_end_run(rank, run):
            return
        why = (
            f"{self._restarted(rank)}: its worker of this run ended without a bye (killed or "
            "crashed), so the run cannot go on and every worker restarts"
        )
        log.warning("shard %d: %s", self.index, why)
        self.ended_run = (self.seeded_at, rank, why)
        held: dict[int, tuple[str, tuple[bytes, dict[str, Any], Any]]] = {}
        for key, waiting in list(self.waiting.items()):
            for r in [r for r in waiting.by_rank if self._of_ended_run(r)]:
                entry = waiting.by_rank.pop(r)
                waiting.arrived.pop(r, None)
                held[id(entry[1])] = (waiting.what, entry)  # a push held under each parameter
            if not waiting.by_rank:
                del self.waiting[key]
                self.gathers_held.discard(key)
        for what, entry in held.values():
            self._dismiss([entry], f"{why}; this worker's {what} is dropped", failed_ranks=[rank])

    def _would_end_run(self, rank: int, run: int | None) -> bool:
        """Whether ``rank``'s hello of ``run``, taken, would end the run its worker of now is
        in (:meth:`_end_run_before`'s rules)."""
        before = self.run_of.get(rank)
        if None in (run, before) or run == before:
            return False
        if rank in self.left or rank in self.lost:
            return False
        if not self.accepted_at.get(rank, self.seeded_at) < self.seeded_at:
            return False  # its worker set up (again) since the seed: the others meet the new one
        # another rank's restart ended this run already: its words stand
        return self.ended_run is None or self.ended_run[0] != self.seeded_at

    def _of_ended_run(self, rank: int) -> bool:
        """Whether ``rank``'s latest accepted hello came before the seed of the run a restart
        ended: a second ``setup`` of a worker since (a script that fits again, told or not)
        starts over with the new worker, as a new run's does."""
        return self.ended_run is not None and self.accepted_at.get(rank, -1) < self.ended_run[0]

    def _of_current_run(self, header: dict[str, Any]) -> bool:
        """Whether ``header`` is of its rank's latest accepted run; a request without a run id,
        or a rank without an accepted hello here, is taken at its word."""
        run, latest = header.get("run"), self.run_of.get(header["rank"])
        return run is None or latest is None or run == latest

    def _refuse_unseeded(self, header: dict[str, Any]) -> None:
        """Refuse a request that needs the values before a seed. A worker of a run this shard
        never heard say ``hello`` set up with it before it started: it was started again (its
        pod restarted; parts are never read back), and what it was seeded with is gone."""
        if self.blocks:
            return
        if header.get("run") is None or header["rank"] in self.run_of:
            raise _Refused("shard not seeded yet (worker 0 seeds it during setup)")
        raise _Refused(
            "shard not seeded yet: it started after this worker's hello (it was started again, "
            "and the values and optimizer state it was seeded with are gone): restart the job "
            "from its newest checkpoint"
        )

    def _note_alive(self, header: dict[str, Any]) -> None:
        """A request of its rank's current run says the rank is alive (async mode declares a
        rank lost that says nothing for the timeout). A ``stats`` does not: it asks about the
        shard, and monitoring tools send it too. Nor does a request of a worker of the run
        before (its ``bye`` or ``beat``): that worker's life says nothing of its rank's."""
        if header["op"] != "stats" and self._of_current_run(header):
            self.last_seen[header["rank"]] = time.monotonic()
            self.heard_at[header["rank"]] = self.requests
            if header["op"] != "bye":  # a worker that says bye goes: a hello held may come in
                self._refuse_held_hello(header["rank"])

    def _of_latest_run(self, header: dict[str, Any]) -> bool:
        """Whether a bye comes from the run of its rank's latest accepted hello, or of a refused
        one since (that worker closes), by the run id both carry (a worker draws one at start;
        one without it passes): a second worker of the rank, alive beside its restart, says
        bye in vain. So does a refused one while the accepted run lives on: its worker was
        heard since the refusal, or its process on this host runs; a stray refused (another
        job's worker given this job's shards) closed the rank and failed the live job."""
        rank, run = header["rank"], header.get("run")
        when, refused = self.refused_at.get(rank, (-1, None))
        refused = refused if when > self.accepted_at.get(rank, -1) else None
        if refused is not None and self._alive_since(rank, when):
            refused = None
        if self._of_current_run(header) or run == refused:
            return True
        log.info(
            "shard %d: a bye from rank %d's run %d, not its latest: ignored", self.index, rank, run
        )
        return False

    def _restarted(self, rank: int) -> str:
        """Why a worker of ``rank``'s run before is told to stop."""
        return f"rank {rank} started again (a newer worker said hello from host {self._host(rank)})"

    def _host(self, rank: int) -> str:
        return self.hosts.get(rank, "unknown host")

    def _who(self, rank: int) -> str:
        """``rank``, its host and its last step, as messages name a rank; one whose host this
        shard never learnt is named by why (:meth:`_hostless`)."""
        if rank not in self.hosts:
            return f"rank {rank} ({self._hostless(rank)})"
        return f"rank {rank} (host {self.hosts[rank]}, {self._steps_of(rank)})"

    def _steps_of(self, rank: int) -> str:
        """``rank``'s last step pushed here, or that it pushed none since its hello: the shard
        forgets a rank's steps at each hello it takes (a new fit's setup, a restarted worker),
        so a rank refused a second fit had trained the first, and "last step none" said it had
        never trained."""
        step = self.last_step.get(rank)
        return "no step since its hello" if step is None else f"last step {step}"

    def _hostless(self, rank: int) -> str:
        """Why the shard knows no host of ``rank``: it never said hello, or its hello was
        refused for its host (one that could not be quoted), or as malformed (its job
        description, its incarnation, or a field of the wrong type: heard, of this job, but
        neither taken nor refused for its host; the warning in the shard's log quotes what). A
        hello refused for anything else came after its host was taken."""
        if rank in self.refused_at:
            return "whose hello was refused for its host"
        if any(heard == rank for heard, _ in self.job_runs):
            return "whose hello was refused: malformed, as this shard's log says"
        return "which never said hello"

    def _closed(self, rank: int) -> str:
        """How a rank that said bye left: ``closed``, or ``closed on "<the error its bye
        carried>"``, quoted: it is free text, and may hold the parentheses and semicolons of the
        lists it stands in."""
        error = self.bye_error.get(rank)
        return f'closed on "{error}"' if error else "closed"

    def _other_job(self, rank: int) -> str | None:
        """What differs where ``rank``'s latest hello (of a new run, or a second setup of its
        worker) was refused as another job's
        (:meth:`~distconv.sync.ps.handlers.RequestHandlers._op_hello`) and none accepted
        since; else None (never refused, accepted since, or refused for its host)."""
        when, said = self.other_job.get(rank, (-1, None))
        return said if when > self.accepted_at.get(rank, -1) else None


def an(word: str) -> str:
    """``word`` after its indefinite article: ``an abandon``, ``a push``."""
    return f"{'an' if word[:1] in tuple('aeiou') else 'a'} {word}"
