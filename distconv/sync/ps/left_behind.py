"""A sync step left behind: other ranks' pushes of a step held on the shard wait for a rank
that closed (its ``bye``) or abandoned that step (its ``abandon``), so the step can never
complete, and the shard fails the job at once, naming why, instead of at its timeout (split
from :mod:`~distconv.sync.ps.gathers`, whose ``bye`` and ``abandon`` notes it reads)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from distconv.rank_endings import different_jobs_in
from distconv.sync.ps.job_hello import REFUSED_JOB
from distconv.sync.ps.refusals import GatherRefusals
from distconv.sync.ps.state import _Refused, _Waiting
from distconv.sync.ps.stuck import held_now, pushes_waiting_for

#: a rank's ``abandon`` note: the step it said will not finish, its error, the ranks it blames
Note = tuple[int, str | None, list[int]]


@dataclass
class LeftBehind:
    """The ranks a held sync push waits for that will never push, and those waiting."""

    #: ranks that said bye (in ``left``), in order
    gone: list[int] = field(default_factory=list)
    #: ranks whose ``abandon`` note names the step a held push waits in, in order
    cutting: list[int] = field(default_factory=list)
    #: per rank in ``cutting``, the note that names that step (of its latest, or one before)
    notes: dict[int, Note] = field(default_factory=dict)
    #: per rank whose held push waits for one of them, the step of that push
    behind: dict[int, int] = field(default_factory=dict)


class StepsLeftBehind(GatherRefusals):
    """The step-left-behind check of :class:`~distconv.sync.ps.server.Shard` (a mixin of
    :class:`~distconv.sync.ps.gathers.ShardGathers`), whose state it shares: the held
    requests, each rank's bye (``left``) and its ``abandon`` note (``abandoned``)."""

    waiting: dict[str, _Waiting]
    gathers_held: set[str]
    hello_at: dict[int, int]
    #: per rank, the step its latest ``abandon`` said will not finish, its error and blames
    abandoned: dict[int, Note]
    lost: set[int]
    last_step: dict[int, int]
    _live: Callable[[], set[int]]
    _fail: Callable[..., None]
    _who: Callable[[int], str]
    _closed: Callable[[int], str]
    _refused_instead: Callable[[list[int]], bool]
    _failed_fields: Callable[[], dict[str, Any]]

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
        any push, and a hello takes its rank out.) A rank's ``abandon`` of a step (its note,
        the latest or one before it: :meth:`_notes_of`, until its next hello) counts as such
        a bye for the pushes of that step while it is alive, by the same rules of blame and
        refusal; closed since, it is named by its note for the pushes of that step, and by its
        bye for a later one.

        Three steps: who left a held step behind (:meth:`_left_behind`), whose failure it is
        or what refusal leads it (:meth:`_notes_blame`, :meth:`_left_behind_lead`), and the
        words (:meth:`_ranks_said`, :func:`waits_for_pushes`)."""
        cut = {r: note for r, note in self.abandoned.items() if r not in self.lost}
        gone_ranks = sorted(self.left - self.lost - set(cut))
        if not gone_ranks and not cut:  # the usual case: nothing to read on every push
            return
        found = self._left_behind(gone_ranks, cut)
        if not found.cutting and not found.gone:
            return  # no held push waits for them
        blamed, heard = self._notes_blame(found.notes)
        # a refusal of the job explains it (and failed it) where no rank abandoned the step
        # on its own error either: one that abandoned it without an error failed nothing
        if not blamed and self._refused_instead(found.gone):
            return
        blamed.update(self._blamed(found.gone))
        lead, fields = self._left_behind_lead(found.gone, blamed, heard)
        said = waits_for_pushes(self._ranks_said(found), found.behind)
        # one that failed on its own is blamed, whatever the others heard
        self._fail(f"{lead}{said}", sorted(blamed), **fields)

    def _left_behind(self, gone_ranks: list[int], cut: dict[int, Note]) -> LeftBehind:
        """Which of ``gone_ranks`` (each said bye) and of the ranks whose note is in ``cut``
        (each abandoned a step) a held push of this run waits for, and which pushes: every
        such rank, not the first alone, so that the failure names and blames each."""
        _, pushes, _ = held_now(self.waiting, self.hello_at, self._live())
        found = LeftBehind()
        for rank in sorted({*gone_ranks, *cut}):
            waits = pushes_waiting_for(self.waiting, self.gathers_held, pushes, rank)
            notes = self._notes_of(rank) if rank in cut else {}
            # its note explains the step it names alone: a closed rank that a later step
            # waits for is named, and blamed, by its bye (it may have closed without an error)
            noted = min((s for s in waits.values() if s in notes), default=None)
            if rank in cut and rank not in self.left:  # alive: only its noted steps are dead
                waits = {q: s for q, s in waits.items() if s in notes}
            if waits:
                (found.cutting if noted is not None else found.gone).append(rank)
                if noted is not None:
                    found.notes[rank] = notes[noted]
                found.behind.update(waits)
        return found

    @cached_property
    def notes_before(self) -> dict[int, tuple[Note, dict[int, Note]]]:
        """Per rank, its ``abandon`` notes before its latest (``abandoned``), by step, with
        that latest note: they hold while it is the rank's latest (a hello forgets it, and them
        with it). A rank whose steps raise one after another (a script that goes on) abandons
        a second step before a slower rank pushes the first: that push must fail the first as
        well (:meth:`_notes_of`)."""
        return {}

    def _keep_note(self, rank: int, note: Note) -> None:
        """Make ``note`` ``rank``'s latest, keeping the notes before it that a push of
        another rank may still meet: each of a step that some other live rank has pushed no
        later step than here (a worker's steps only go up until its next hello)."""
        earlier = self._notes_of(rank)
        floor = min((self.last_step.get(q, -1) for q in self._live() - {rank}), default=-1)
        earlier = {s: n for s, n in earlier.items() if s >= floor and s != note[0]}
        self.abandoned[rank] = note
        self.notes_before[rank] = (note, earlier)

    def _notes_of(self, rank: int) -> dict[int, Note]:
        """``rank``'s abandon notes by step: its latest (none after its hello) and those
        kept before it (:meth:`_keep_note`)."""
        latest = self.abandoned.get(rank)
        if latest is None:
            return {}
        kept = self.notes_before.get(rank)
        return {**(kept[1] if kept is not None and kept[0] is latest else {}), latest[0]: latest}

    @staticmethod
    def _notes_blame(notes: dict[int, Note]) -> tuple[set[int], list[str]]:
        """Whose failure the abandon ``notes`` (by rank) say it is, by a bye's rules
        (:meth:`_blamed`, :meth:`_refusal`) read from each note: its rank where it carried its
        own error, or the ranks its ``failed_ranks`` name (a ``PeerFailed``: theirs); and the
        words of each that heard the ranks run different jobs (no rank failed), in order."""
        blamed: set[int] = set()
        heard: list[str] = []
        for rank, (_, error, blames) in notes.items():
            if not error:
                continue  # no failure said: no one's, as a bye without one
            words = None if blames else different_jobs_in([error])
            if words is None:  # it failed, or a PeerFailed naming the ranks that did
                blamed.update(blames or [rank])
            else:
                heard.append(words)  # the mismatch it heard: no rank failed
        return blamed, heard

    def _left_behind_lead(
        self, gone: list[int], blamed: set[int], heard: list[str]
    ) -> tuple[str, dict[str, str]]:
        """What leads the failure, and its reply's fields: nothing where a rank is
        ``blamed`` (the failure is its); else a refusal of the job (``refused: "job"``), led
        by the words of a ``gone`` rank that left on the ranks' different jobs
        (:meth:`_refusal_lead`), or else by the first a noted rank ``heard``."""
        if blamed:
            return "", {}
        lead, fields = self._refusal_lead(gone)
        if not lead and heard:  # led by a cut rank's words, as by a bye's
            return f"{heard[0]}; ", REFUSED_JOB
        return lead, fields

    def _ranks_said(self, found: LeftBehind) -> list[str]:
        """How each rank that left the step behind is named: a gone one as it closed
        (:meth:`_closed`), then each that abandoned it by its note (:meth:`_cut`)."""
        said = [f"{self._who(r)} {self._closed(r)}" for r in found.gone]
        return said + [f"{self._who(r)} {self._cut(*found.notes[r][:2])}" for r in found.cutting]

    @staticmethod
    def _cut(step: int, error: str | None) -> str:
        """How a rank that abandoned ``step`` (its note) left it, as :meth:`_closed` says a
        bye: ``abandoned step 2 on "<the error>"``, quoted."""
        return f'abandoned step {step} on "{error}"' if error else f"abandoned step {step}"

    def _collect_push(
        self, ident: bytes, header: dict[str, Any], params: list, parts: list
    ) -> None:
        """Sync: hold the push (:meth:`~distconv.sync.ps.state.BlockUpdates._collect_push`),
        but fail its step first where a rank abandoned it and went past it
        (:meth:`_fail_step_passed`)."""
        self._fail_step_passed(header, params)
        super()._collect_push(ident, header, params, parts)  # type: ignore[misc]

    def _fail_step_passed(self, header: dict[str, Any], params: list[int]) -> None:
        """Fail the job where this push is of a step that a rank abandoned (its note) and
        went past: its push of a later step is held for one of ``params``, so the shard
        collects that step there, and this one can never complete. Before, the push was
        refused as of a step the shard does not collect: its rank stopped on that, blamed,
        whose only fault was to wait for the abandoned step, and the later step's push waited
        out the timeout.

        Raises:
            _Refused: the failure, answering this push (it is not held: :meth:`_fail`
                answered the held ones).
        """
        step, rank = header["step"], header["rank"]
        noted = {
            r: notes[step]
            for r in sorted(self.abandoned)
            if r != rank and r not in self.lost and step in (notes := self._notes_of(r))
        }
        if not noted:
            return  # the usual case: no other rank abandoned this step
        for p in params:
            held = self.waiting.get(f"push:{p}")
            first = next(iter(held.by_rank.values()), None) if held else None
            if first is None or first[1]["step"] == step:
                continue  # the shard collects this step, or nothing, for ``p``
            passed = {r: note for r, note in noted.items() if r in held.by_rank}
            if passed:
                blamed, heard = self._notes_blame(passed)
                lead, fields = self._left_behind_lead([], blamed, heard)
                said = [f"{self._who(r)} {self._cut(*note[:2])}" for r, note in passed.items()]
                said = waits_for_pushes(said, {rank: step})
                self._fail(f"{lead}{said}", sorted(blamed), **fields)
                raise _Refused(self.failed or said, **self._failed_fields())


def waits_for_pushes(said: list[str], behind: Mapping[int, int]) -> str:
    """The failure's words after its lead: how each rank that will never push left (``said``,
    one entry a rank), then the ranks ``behind`` (rank -> the step of its held push) waiting:
    ``rank 1 (...) closed; rank 0 (step 4) waits for its push, and the step cannot complete
    without it``."""
    its = "its push, and the step cannot complete without it"
    if len(said) > 1:
        its = "their pushes, and the step cannot complete without them"
    return f"{'; '.join(said)}; {held_steps(behind)} for {its}"


def held_steps(behind: Mapping[int, int]) -> str:
    """The ranks ``behind`` (rank -> the step of its held push) as the subject of the
    sentence: ``rank 0 (step 4) waits``, ``rank 0 (step 4), rank 2 (step 4) wait``."""
    waiting = ", ".join(f"rank {q} (step {s})" for q, s in sorted(behind.items()))
    return f"{waiting} {'waits' if len(behind) == 1 else 'wait'}"
