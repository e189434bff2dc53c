"""A sync step left behind: other ranks' pushes of a step held on the shard wait for a rank
that closed (its ``bye``) or abandoned that step (its ``abandon``), so the step can never
complete, and the shard fails the job at once, naming why, instead of at its timeout (split
from :mod:`~distconv.sync.ps.gathers`, whose ``bye`` and ``abandon`` notes it reads)."""

from __future__ import annotations

from collections.abc import Callable

from distconv.rank_endings import different_jobs_in
from distconv.sync.ps.job_hello import REFUSED_JOB
from distconv.sync.ps.refusals import GatherRefusals
from distconv.sync.ps.state import _Waiting
from distconv.sync.ps.stuck import held_now, pushes_waiting_for


class StepsLeftBehind(GatherRefusals):
    """The step-left-behind check of :class:`~distconv.sync.ps.server.Shard` (a mixin of
    :class:`~distconv.sync.ps.gathers.ShardGathers`), whose state it shares: the held
    requests, each rank's bye (``left``) and its ``abandon`` note (``abandoned``)."""

    waiting: dict[str, _Waiting]
    gathers_held: set[str]
    hello_at: dict[int, int]
    #: per rank, the step its latest ``abandon`` said will not finish, its error and blames
    abandoned: dict[int, tuple[int, str | None, list[int]]]
    lost: set[int]
    _live: Callable[[], set[int]]
    _fail: Callable[..., None]
    _who: Callable[[int], str]
    _closed: Callable[[int], str]
    _refused_instead: Callable[[list[int]], bool]

    def _fail_step_left_behind(self) -> None:
        """Sync: a rank closed (an exception, or fewer steps) while other ranks' pushes of a
        parameter's step it never pushed are held here, whichever came first. That step can
        never complete: a worker of the rank started again would say ``hello`` and wait in the
        start-up gather, which fails the job then (:func:`~distconv.sync.ps.stuck.stuck`). So
        fail it now, naming every such rank and its error, instead of at the timeout: blaming
        each that failed (:meth:`_blamed`), and a refusal of the job, led by the words, only
        where one of them closed on the ranks' different jobs and none failed on its own
        (:meth:`_refusal`). Read per
        parameter, not per step: a worker that raised in backward may have pushed some of the
        step's parameters to this shard (push_bytes coalescing sends them as they come), and
        the others of that step still wait for it. (A rank in ``left`` said bye in this run of
        the workers: every rank says ``hello`` before the start-up gather, which comes before
        any push, and a hello takes its rank out.) A rank's ``abandon`` of a step (its note
        in ``abandoned``, until its next hello) counts as such a bye for the pushes of that
        step while it is alive, by the same rules of blame and refusal."""
        cut = {r: note for r, note in self.abandoned.items() if r not in self.lost}
        gone_ranks = sorted(self.left - self.lost - set(cut))
        if not gone_ranks and not cut:  # the usual case: nothing to read on every push
            return
        _, pushes, _ = held_now(self.waiting, self.hello_at, self._live())
        behind: dict[int, int] = {}  # the ranks whose held steps wait for a gone rank's push
        gone, cutting = [], []  # every rank a held step waits for, not the first alone
        for rank in sorted({*gone_ranks, *cut}):
            waits = pushes_waiting_for(self.waiting, self.gathers_held, pushes, rank)
            if rank in cut and rank not in self.left:  # alive: only its noted step is dead
                waits = {q: s for q, s in waits.items() if s == cut[rank][0]}
            if waits:
                (cutting if rank in cut else gone).append(rank)
                behind.update(waits)
        if not cutting and (not gone or self._refused_instead(gone)):  # a refusal explains it
            return
        waiting = ", ".join(f"rank {q} (step {s})" for q, s in sorted(behind.items()))
        verb = "waits" if len(behind) == 1 else "wait"
        its = "its push, and the step cannot complete without it"
        if len(gone) + len(cutting) > 1:
            its = "their pushes, and the step cannot complete without them"
        blamed, heard = set(self._blamed(gone)), []
        for rank in cutting:  # a bye's rules (_blamed, _refusal), read from its note
            _, error, blames = cut[rank]
            if not error:
                continue  # no failure said: no one's, as a bye without one
            words = None if blames else different_jobs_in([error])
            if words is None:  # it failed, or a PeerFailed naming the ranks that did
                blamed.update(blames or [rank])
            else:
                heard.append(words)  # the mismatch it heard: no rank failed
        lead, fields = ("", {}) if blamed else self._refusal_lead(gone)
        if not blamed and not lead and heard:  # led by a cut rank's words, as by a bye's
            lead, fields = f"{heard[0]}; ", REFUSED_JOB
        said = [f"{self._who(r)} {self._closed(r)}" for r in gone]
        said += [f"{self._who(r)} {self._cut(*cut[r][:2])}" for r in cutting]
        self._fail(  # one that failed on its own is blamed, whatever the others heard
            f"{lead}{'; '.join(said)}; {waiting} {verb} for {its}", sorted(blamed), **fields
        )

    @staticmethod
    def _cut(step: int, error: str | None) -> str:
        """How a rank that abandoned ``step`` (its note) left it, as :meth:`_closed` says a
        bye: ``abandoned step 2 on "<the error>"``, quoted."""
        return f'abandoned step {step} on "{error}"' if error else f"abandoned step {step}"
