"""Whose failure a failure the gone ranks left is, and the words that lead it where they left
on the ranks' different jobs: a refusal of the job (``refused: "job"``), not a rank's failure
(split from :mod:`~distconv.sync.ps.gathers`, whose checks, and the timeouts', use them)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from distconv.rank_endings import different_jobs_in
from distconv.sync.ps.job_hello import REFUSED_JOB

log = logging.getLogger("distconv.pserver")

#: what ends the words of a start refused on the ranks' different jobs alone
START_ENDED = (
    "this start of the job ended here, nothing seeded: the shards serve the next start, so "
    "start every worker again with the same flags"
)


class GatherRefusals:
    """The refusal helpers of :class:`~distconv.sync.ps.server.Shard` (a mixin of
    :class:`~distconv.sync.ps.gathers.ShardGathers`), whose state they share: each gone
    rank's bye (``left``, ``bye_error``, ``bye_blames``) and its refused hello
    (``_other_job``)."""

    index: int
    left: set[int]
    bye_error: dict[int, str | None]
    bye_blames: dict[int, list[int]]
    blocks: dict[int, Any]
    waiting: dict[str, Any]
    gathers_held: set[str]
    _seeding: Any
    _other_job: Callable[[int], str | None]
    _dismiss: Callable[..., None]
    _unbind: Callable[[], None]

    def _end_refused_start(self, gone: Iterable[int]) -> bool:
        """End this start of the job without failing the shard, where what is held can never
        be answered and its only fault is the ranks' different jobs: the ``gone`` ranks left
        on them, none failed on its own (:meth:`_refusal`), and nothing is seeded, nor being
        seeded. Every request held is answered with that refusal and the way on (what each
        rank waits in adds nothing to it: the line quoted the refusal three times, 800
        characters and more), as a refusal of the job (exit 1), and the shard holds no job:
        the corrected start binds it afresh, as after a refused ``--world-size``. A failed
        shard served no other job until restarted by hand, on every shard host, though it held
        nothing of the job. Whether this was done (else the caller fails the job)."""
        refusal = self._refusal(gone)
        if self.blocks or self._seeding is not None or refusal is None:
            return False
        said = f"{refusal}; {START_ENDED}"
        log.warning("shard %d: %s", self.index, said)
        held = [entry for waiting in self.waiting.values() for entry in waiting.by_rank.values()]
        self.waiting, self.gathers_held = {}, set()
        self._dismiss(held, said, **REFUSED_JOB)
        self._unbind()
        return True

    def _blamed(self, gone: Iterable[int]) -> list[int]:
        """The ranks whose failure it is that the ``gone`` ranks (each said bye) left: one
        that closed on an error, or, where that error was another rank's failure (its bye's
        ``failed_ranks``), that rank, whatever its words (a peer's failure is a failure, as
        the shard that named it said); none for a rank that closed without an error (fewer
        steps) or on the ranks' different jobs (:meth:`_job_refused`: the ranks' jobs do not
        fit; one refused for its host is blamed: its own failure)."""
        blamed: set[int] = set()
        for rank in gone:
            if not self.bye_error.get(rank):
                continue  # fewer steps: no one's fault
            if self.bye_blames.get(rank):
                blamed.update(self.bye_blames[rank])
            elif self._job_refused(rank) is None:
                blamed.add(rank)
        return sorted(blamed)

    def _refusal(self, gone: Iterable[int]) -> str | None:
        """The words that lead a failure the ``gone`` ranks left (each said bye), as a refusal
        of the job (``refused: "job"``), where one of them left on the ranks' different jobs
        (:meth:`_job_refused`) and each other one did too or closed without an error (it
        trained fewer steps: no rank failed, and a restart would stop on the mismatch again):
        the first's. None where any failed on its own (blamed: the failure is its, whatever
        the others heard). One that never said bye (silent, at a timeout) keeps no such words
        from leading: the failure names and blames it too, but the mismatch is the known cause,
        which a restart would stop on again. A failure note (a rank that could not set up:
        :mod:`~distconv.sync.ps.setup_notes`) is none of these: its ``bye`` is not recorded,
        and the note takes its rank out of ``left`` (a ``bye`` of an earlier run), so its
        words never lead here; they reach the other ranks as the refusal of their gathers
        (the start-up job check; a barrier or an allreduce but where the timeout loses the
        rank; the waits its process's end answers), or lead the failure the note makes where
        held sync pushes wait for its rank. Its rank, still live, that says nothing more is
        silent at a timeout: named and blamed, led by no refusal."""
        said = []
        for rank in sorted(set(gone) & self.left):
            words = self._job_refused(rank)
            if words is None and self.bye_error.get(rank):
                return None
            said += [words] if words is not None else []
        return said[0] if said else None

    def _refusal_lead(self, gone: Iterable[int]) -> tuple[str, dict[str, str]]:
        """What leads a failure the ``gone`` ranks left, and its reply's fields: the words and
        ``refused: "job"`` where one closed on the ranks' different jobs and each other one
        did too or closed without an error (:meth:`_refusal`),
        else nothing: the same rule on every path (a step left behind, a stuck gather, the
        timeout), so that no failure blaming a rank leads with words the launcher reads as
        the mismatch (no restart)."""
        said = self._refusal(gone)
        return ("", {}) if said is None else (f"{said}; ", REFUSED_JOB)

    def _job_refused(self, rank: int) -> str | None:
        """The words saying that the ranks run different jobs where ``rank`` left on them, or
        None: its hello refused here as another job's (:meth:`_other_job`), or its bye's error
        saying so (:func:`~distconv.rank_endings.different_jobs_in`). The latter is a refusal
        heard elsewhere: with two shards, a rank that shard 0 stopped in its start-up gather
        for a rank of another ``--job-id`` closes with that ``JobRefused`` here, and was blamed
        for it, the other ranks stopping as on its failure. None for a rank whose
        bye carried ``failed_ranks`` as well: it stopped on their failure (:meth:`_blamed`)."""
        if self.bye_error.get(rank) and self.bye_blames.get(rank):
            return None  # it closed on another rank's failure (:meth:`_blamed`), not on this
        said = self._other_job(rank)
        if said is None and (error := self.bye_error.get(rank)):
            said = different_jobs_in([error])
        return said
