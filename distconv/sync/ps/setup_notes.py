"""The shard's side of a worker that could not set up (a failure note).

A parameter-server worker whose fit fails before its setup says ``hello`` with a description
naming its error alone (:func:`~distconv.sync.errors.setup_failure_description`, sent by
:meth:`~distconv.sync.ps.setup_failure.SetupFailure.fail_setup`), then ``bye``. Taken as a
job's description, two such hellos (every rank failing alike: NaN data, an empty set) differed
in the rank they name, the shard failed the job for good, and a fit with the data fixed, or
the trained state of an earlier fit, was refused until the shard restarted; its ``/healthz``
turned 503 on a user's data error.

So the shard reads such a hello as what it is, "rank R could not set up": it neither binds
the job's description, nor compares it, nor fails the job. It refuses the hello in those words
(the worker drops the refusal: its own error is the cause), answers every other live rank's
held start-up job check, or its next one (or any other gather, but where an async job
going on without a lost rank would lose R at its timeout, which it never does for rank 0,
the chief, nor for one that never joined: :meth:`SetupNotes._notes_answer`), at once with
them (``refused:
job``, as MPI's job check refuses: a told worker raises ``JobRefused`` marked with R,
its ``told_of``, which ``run_main`` and ``distconv train`` end with one line and exit 75, and the
launcher reads as rank R's failure: :func:`~distconv.sync.peers.told_failure`), and
ignores the ``bye`` of R's run that follows (its rank did not close on the job: it never
joined), but for its process: its end (the script's, after its last fit failed) is no
crash, but answers a worker from before the note that waits for R, told and fitting again, at
once (not where an async job going on without a lost rank would lose R then). A rank that
closed an earlier run (its bye) is closed no more once its note comes: its process's end
answers those waits too, and a timeout blames it.
In sync mode, a note of a rank whose restarted worker left a step the others' held pushes
wait for fails the job at once, as its failure (``failed_ranks`` [R]): that step can never
complete; so does such a push that comes after the note. Like any hello, a note drops its
rank's gathers of the run before (their worker told). A rank told, or failing too, is not told
of another note of that fit (from a rank still to be told of the first), even where it
fitted again since, but is of a later note of a rank it knows of (a new fit); R's own note,
where R was told of another's note, or failed alike, is of its next fit: it pairs with none
of them, and tells their ranks too (a fixed fit may wait for R). R's
next hello with a real description (the fixed fit) ends the note and goes on as any hello: on
a fresh shard as the job's first, else against the job an earlier good fit bound. A note
naming another rank than its sender's, or a meeting's failure (no hello carries one), is
refused as malformed.
A note tells no worker known to come from another start of the job than its own (a launch's
restart: :mod:`~distconv.sync.ps.incarnations`), and the first hello of a later restart of
that launch drops it: the ranks it was to tell were stopped with it, and a timeout waiting for
its rank no longer quotes it (:meth:`SetupNotes._standing_note`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distconv.rank_endings import SETUP_FAILURE_NAME, setup_failure_text
from distconv.sync.errors import setup_failure_in
from distconv.sync.ps.incarnations import Incarnation, differ, older
from distconv.sync.ps.job_hello import REFUSED_JOB, HelloJob
from distconv.sync.ps.left_behind import held_steps
from distconv.sync.ps.processes import ProcessWatch
from distconv.sync.ps.state import _Refused, _Waiting
from distconv.sync.ps.stuck import held_now, pushes_waiting_for
from distconv.sync.ps.wire import WireError


def _job_check(tag: Any) -> bool:
    """Whether gather ``tag`` is a start-up job check (``all_equal``), the one gather a note
    answers in an async job going on without a lost rank: a rank that could not set up was
    never in any other."""
    return str(tag).startswith("all_equal:")


def _note_said(rank: int, described: object) -> str | None:
    """ "rank R could not set up: Type: text" where ``described`` is rank ``rank``'s failure
    note (a :func:`~distconv.sync.errors.setup_failure_description`), else None.

    Raises:
        WireError: a note naming another rank, or a meeting's failure (a hello never carries
            one): taken, it told a rank of its own failure, and its launcher blamed it.
    """
    if not isinstance(described, Mapping) or list(described) != ["name"]:
        return None
    name = described["name"]
    if (found := SETUP_FAILURE_NAME.fullmatch(name) if isinstance(name, str) else None) is None:
        if setup_failure_in(described) is not None:
            raise WireError(f"hello of rank {rank}: a meeting's failure, not a setup's")
        return None
    if int(found[1]) != rank:
        raise WireError(f"hello of rank {rank}: a failure note of rank {found[1]}")
    return setup_failure_text(rank, found[2])


@dataclass
class SetupNote:
    """A rank's failure note, standing until every other live rank knows of it."""

    said: str  #: "rank R could not set up: Type: text"
    at: int  #: the shard's count of requests when it came
    #: the live ranks not yet told of it, nor failing themselves since (a note of theirs)
    told: set[int] = field(default_factory=set)
    #: False once its rank said hello again with a real description: it tells no one then
    #: (its rank may meet their gathers now), but a late note of another rank's same failed
    #: fit still finds it (each failed: neither is told of the other's)
    telling: bool = True
    #: the start of the job its hello came from (:mod:`~distconv.sync.ps.incarnations`)
    incarnation: Incarnation | None = None


class SetupNotes:
    """The failure notes of :class:`~distconv.sync.ps.server.Shard` (a mixin placed before
    :class:`~distconv.sync.ps.gathers.ShardGathers`, whose ``gather`` and ``bye`` it sees
    first), whose state it shares."""

    index: int
    config: Any
    requests: int
    hello_at: dict[int, int]
    accepted_at: dict[int, int]
    lost: set[int]
    left: set[int]
    met_at: int  # the count when every live rank last met in a gather
    waiting: dict[str, _Waiting]
    gathers_held: set[str]
    #: per rank whose note stands (see :class:`SetupNote`)
    setup_notes: dict[int, SetupNote]
    #: per rank whose latest hello was a note: its run, whose ``bye`` then counts for nothing
    noted_run: dict[int, int | None]
    #: per rank, the shard's count of requests when it was last told of a note: one told
    #: since the ranks last met is not told of another note of that fit (told once)
    told_at: dict[int, int]
    #: per rank told since it last set up, the ranks whose failed fit it knows of (told of
    #: their notes, or left off one as failing alike): a later note of one of them is of a
    #: new fit, which it is told of
    knows_of: dict[int, set[int]]
    #: per rank whose latest hello was a note: its words, and when it came
    noted_at: dict[int, tuple[str, int]]
    #: per noted rank whose process ended since its note: why (its words and that end)
    noted_gone: dict[int, str]
    #: per rank, the incarnation of its latest hello (None: it carried none)
    incarnations: dict[int, Incarnation | None]
    processes: ProcessWatch
    last_seen: dict[int, float]
    _live: Callable[[], set[int]]
    _began: Callable[[str], int]
    _joined_before: Callable[[int, int], bool]
    _drop_gather: Callable[[str], None]
    _forget_gathers: Callable[[int], None]
    _dismiss: Callable[..., None]
    _reply: Callable[..., None]
    _fail: Callable[..., None]
    failed: str | None

    def _take_setup_note(
        self,
        rank: int,
        run: int | None,
        job: HelloJob,
        header: Mapping[str, Any],
        incarnation: Incarnation | None = None,
    ) -> None:
        """Read ``rank``'s hello (of ``run``, naming ``job``; its ``header``; from
        ``incarnation``): a note of an earlier start of the job is dropped; a real description
        makes its note, if any, tell no one, and returns; a failure note is taken (see the
        module docstring).

        Raises:
            _Refused: the note's hello, in its words (``refused: job``).
        """
        said = _note_said(rank, job.described) if job.left_out is None else None
        self.noted_gone.pop(rank, None)  # a worker of it again
        self.incarnations[rank] = incarnation
        # the launcher started the job again: the ranks a note of the start before was to tell
        # are gone, and its rank's worker of this start has not failed (yet)
        self.setup_notes = {
            r: n for r, n in self.setup_notes.items() if not older(n.incarnation, incarnation)
        }
        if said is None:
            if rank in self.setup_notes:
                self.setup_notes[rank].telling = False
            self.noted_run.pop(rank, None)
            self.noted_at.pop(rank, None)
            return
        self.noted_run[rank] = run
        self.noted_at[rank] = (said, self.requests)
        # no longer closed (a bye of an earlier run): a rank the others' next fit waits for,
        # whose process's end and silence at a timeout are its own; but no request of its
        # earlier run says when it went silent (its note's bye stops that watch anyway)
        self.left.discard(rank)
        self.last_seen.pop(rank, None)
        # its process, watched still: its end is no crash, but answers a wait for its rank
        self.processes.track(rank, header.get("process", ""), header["host"])
        # as any hello: a gather of the rank's run before (a worker gone while in its job
        # check) is dropped, its worker told; held, it met a restarted rank's job check later,
        # which went on as if this rank had set up
        self._forget_gathers(rank)
        # a note from before the ranks last met is of a fit they got past: it pairs with none
        notes = {r: n for r, n in self.setup_notes.items() if n.at > self.met_at}
        # and one pairs only where this rank is still to be told of it (never told, nor failed
        # since): a rank told of it, or left off it, has ended that fit, so this note is of its
        # next, and the ranks it tells are its own (the fixed fit of that note's rank too)
        paired = {r: n for r, n in notes.items() if rank in n.told}
        # a rank that failed too in this fit will not wait: neither is told of the other's;
        # nor is one told of another's note of this fit and not set up since: its fit ended.
        # One that knows of a note of this rank is told: a rank's next note is of a new fit
        told = {q for q in self.told_at if self._told_lately(q) and rank not in self.knows_of[q]}
        # and one told of (or left off) a note this one pairs with, fitting again since: it
        # ended that fit, and its next one waits for this rank's next
        told |= {q for r, n in paired.items() for q in self._live() - n.told - {r, rank}}
        for q in told:
            self.knows_of.setdefault(q, set()).add(rank)
        note = SetupNote(
            said, self.requests, self._live() - {rank} - set(paired) - told, incarnation=incarnation
        )
        for other in paired.values():
            other.told.discard(rank)
        for key in sorted(self.gathers_held):
            held = self.waiting[key]
            if not self._notes_answer(held.what, rank, self._began(key)):
                continue
            to_tell = [r for r in sorted(note.told & set(held.by_rank)) if self._tells(note, r)]
            dropped = [held.by_rank.pop(r) for r in to_tell]
            for q in (request["rank"] for _, request, _ in dropped):
                self._told(q, {**notes, rank: note})
            if not held.by_rank:
                self._drop_gather(key)
            self._dismiss(dropped, said, **REFUSED_JOB)
        notes[rank] = note
        self.setup_notes = {r: n for r, n in notes.items() if n.told}
        self._fail_steps_without(rank, said)
        raise _Refused(said, **REFUSED_JOB)

    def _standing_note(self, rank: int) -> str | None:
        """The words of ``rank``'s failure note where its latest hello was one that still
        stands, else None: not one of an earlier start of the job than another rank's latest
        hello (the launcher restarted every worker since: that restart's first hello dropped the
        note, and the rank's worker of this start has not failed, or has not said so yet)."""
        if rank not in self.noted_at:
            return None
        own = self.incarnations.get(rank)
        if any(older(own, theirs) for theirs in self.incarnations.values()):
            return None
        return self.noted_at[rank][0]

    def _tells(self, note: SetupNote, rank: int) -> bool:
        """Whether ``note`` may tell ``rank``: not where the two are known to come from two
        starts of the job (:func:`~distconv.sync.ps.incarnations.differ`). A hello without an
        incarnation, or of another launch, is told as any."""
        return not differ(note.incarnation, self.incarnations.get(rank))

    def _told(self, rank: int, notes: Mapping[int, SetupNote]) -> None:
        """``rank`` is told of a note now: told once, it is told of none of ``notes`` (the
        others standing, by rank, of ranks that failed that fit too), which would refuse its
        next fit too, one that may meet their fixed ones; a later note of one of their ranks
        is of a new fit, which it is told of (:attr:`knows_of`)."""
        if not self._told_lately(rank):
            self.knows_of[rank] = set()
        self.told_at[rank] = self.requests
        self.knows_of[rank].update(notes)
        for note in notes.values():
            note.told.discard(rank)

    def _told_lately(self, rank: int) -> bool:
        """Whether ``rank`` was told of a note since the ranks last met and since its latest
        accepted hello (it has not fitted again since)."""
        told = self.told_at.get(rank, -1)
        return told > max(self.met_at, self.accepted_at.get(rank, -1))

    def _fail_steps_without(self, rank: int, said: str) -> None:
        """Sync: ``rank`` (its worker restarted mid-training, then failed before setup) left
        steps the other ranks' held pushes wait for; no push of it will come, so fail the job
        now, as its failure, not at the timeout (as a step left behind by a ``bye`` does)."""
        if self.config.mode != "sync":
            return
        _, pushes, _ = held_now(self.waiting, self.hello_at, self._live())  # of this run
        behind = pushes_waiting_for(self.waiting, self.gathers_held, pushes, rank)
        if behind:
            self._fail(f"{said}; {held_steps(behind)} for its push of a step held here", [rank])

    def _fail_step_left_behind(self) -> None:
        """Sync, after a push or a bye: a step left behind by a rank gone
        (:meth:`~distconv.sync.ps.left_behind.StepsLeftBehind._fail_step_left_behind`), or by
        a rank whose latest hello is a note (its worker restarted mid-training, then failed before
        setup), fails the job now: a push that waits for it and came after the note, not
        before, was held for the timeout, the note's words lost."""
        super()._fail_step_left_behind()  # type: ignore[misc]
        for noted, (said, _) in sorted(self.noted_at.items()):
            if self.failed:
                return
            self._fail_steps_without(noted, said)

    def _notes_answer(self, tag: Any, noted: int, began: int) -> bool:
        """Whether rank ``noted``'s note answers gather ``tag`` (begun at the shard's count
        ``began``) of a rank to be told: a start-up job check always; any other (a barrier, a
        metrics sum: of a fit past its job check, which the note's rank, at a fit's start,
        never makes) unless its timeout loses the noted rank and the job goes on
        (:meth:`_lost_at_timeout`). Elsewhere it waited for the timeout only to fail the job
        then."""
        return _job_check(tag) or not self._lost_at_timeout(noted, began)

    def _lost_at_timeout(self, noted: int, began: int) -> bool:
        """Whether a gather begun at the shard's count ``began`` that waits for rank ``noted``
        ends at its timeout by losing that rank, the job going on without it
        (:meth:`~distconv.sync.ps.losses.WorkerLosses._stragglers`): in an async job with
        ``--on-worker-loss continue``, for a rank other than 0 (the chief: the job cannot go
        on without it) that joined the job before the gather began (for one that never did,
        the timeout fails the job)."""
        return (
            self.config.on_worker_loss == "continue"
            and noted != 0
            and self._joined_before(noted, began)
        )

    def _op_gather(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        """A rank still to be told of a note is answered with it at once in its start-up job
        check, or another gather where :meth:`_notes_answer`: that gather would wait for a
        rank that never joins. A barrier between epochs of an async job going on without a
        lost rank is not the note's where its timeout loses the rank."""
        rank = header["rank"]
        began = self._began(f"gather:{header['tag']}")
        if self.index == 0 and (why := self._noted_gone_for(rank, began)):
            raise _Refused(why, **REFUSED_JOB)
        for noted, note in sorted(self.setup_notes.items()):
            # a rank lost since (async, continue): the job goes on without it, no note stops it
            if (
                self.index == 0
                and note.telling
                and rank in note.told
                and noted not in self.lost
                and self._tells(note, rank)
                and self._notes_answer(header["tag"], noted, began)
            ):
                self._told(rank, self.setup_notes)
                self.setup_notes = {r: n for r, n in self.setup_notes.items() if n.told}
                raise _Refused(note.said, **REFUSED_JOB)
        super()._op_gather(ident, header, arrays)  # type: ignore[misc]

    def _op_bye(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        """The ``bye`` that follows a note (its run's) counts for nothing: that rank never
        joined the job, so no rank waits for it, and no failure is its closing. Nor is its
        silence a loss, or its process's end a crash (a trained fit, then the same script's
        failed last one: the script's end failed the job as a crash): that end answers only
        the waits for its rank that no worker of it will join (:meth:`_noted_process_ended`).
        It stays live, not closed: the other ranks' next fit waits for its next."""
        rank = header["rank"]
        if rank in self.noted_run and self.noted_run[rank] == header.get("run"):
            self.last_seen.pop(rank, None)
            self._reply(ident, header)
            return
        super()._op_bye(ident, header, arrays)  # type: ignore[misc]

    def _noted_gone_for(self, rank: int, began: int) -> str | None:
        """Why ``rank``'s gather (begun at the shard's count ``began``) can never be met, or
        None: a rank whose process ended after its note (:meth:`_noted_process_ended`), where
        ``rank``'s worker is one from before that note (its latest hello of a new run came
        before it: a relaunch may meet the noted rank's relaunch), and the gather's timeout
        would not lose that rank, the job going on (:meth:`_lost_at_timeout`)."""
        for noted, why in sorted(self.noted_gone.items()):
            if (
                noted != rank
                and self.hello_at.get(rank, -1) < self.noted_at[noted][1]
                and not self._lost_at_timeout(noted, began)
            ):
                return why
        return None

    def _noted_process_ended(self, rank: int, pid: int) -> None:
        """The process of ``rank``, whose latest hello was a note, ended (on this host): no
        crash (the script's end after its last fit failed), but no worker of that run will
        join a gather any more. A worker from before the note that waits for the rank (told,
        it fitted again) is answered at once with the note and the end, as is its next
        gather, not at the timeout; a worker started since (a relaunch) waits on, for the
        rank's relaunch."""
        said, _ = self.noted_at[rank]
        self.noted_gone[rank] = f"{said}; its process (pid {pid}, on this host) ended since"
        for key in sorted(self.gathers_held):
            held, began = self.waiting[key], self._began(key)
            if rank in held.by_rank:
                continue
            answered = [q for q in sorted(held.by_rank) if self._noted_gone_for(q, began)]
            why = [self._noted_gone_for(q, began) for q in answered]
            dropped = [held.by_rank.pop(q) for q in answered]
            if not held.by_rank:
                self._drop_gather(key)
            for entry, words in zip(dropped, why):
                self._dismiss([entry], words, **REFUSED_JOB)
