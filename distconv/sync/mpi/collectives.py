"""The sync contract's job-level collectives over an MPI communicator: everything a rank
exchanges with the others besides gradients (start-up broadcasts, the job check, metrics).

Setup's job check, a metrics sum, the barrier and a broadcast of rank 0's parameters between
steps open with the ranks' exchange of where they are
(:meth:`~distconv.sync.mpi.step_check.StepCheck.meet`), as every step does: a rank that sums
while another starts a step, or closes, or sets up again, is named, not left waiting."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from distconv.notes import add_note
from distconv.parameter import Parameter
from distconv.sync.base import StateDict, SyncError
from distconv.sync.closing import meeting_refused
from distconv.sync.description import as_sent
from distconv.sync.errors import meeting_failure_description, setup_failure_description
from distconv.sync.local import LocalSync
from distconv.sync.mpi.comm import (
    JobMismatch,
    allgather_bytes,
    bcast_in_place,
    rank0_names,
    same_job,
)
from distconv.sync.mpi.held import HeldInterrupt
from distconv.sync.mpi.identity import introduce
from distconv.sync.mpi.numbering import StepNumbers
from distconv.sync.mpi.step_check import (
    BARRIER,
    BROADCAST,
    FAILED,
    SETUP,
    SUMMING,
    StepCheck,
    where,
)
from distconv.sync.mpi.telling import tell_error, untold
from distconv.sync.others_told import others_told

_T = TypeVar("_T")


def held(meeting: Callable[..., _T]) -> Callable[..., _T]:
    """``meeting`` (a meeting's exchange, then its collectives) with a Ctrl-C held to its end:
    raised as the exchange's Wait returned (a SIGINT that came while this rank waited there for
    a slower one), it left the exchange pending here, so every later step and meeting refused
    ("no exchange ... while step N's check is open"), and the collectives after it unmade, which
    the other ranks, past the exchange, waited in. Every wait in there is a blocking call, which
    no Ctrl-C leaves before it returns: held or not, a rank that never comes is the watchdog's."""

    @functools.wraps(meeting)
    def held_to_the_end(*args: Any, **kwargs: Any) -> _T:
        with HeldInterrupt():
            return meeting(*args, **kwargs)

    return held_to_the_end


#: the ways on that a refusal after a step (or setup) that failed or was abandoned names: a
#: setup on every rank (what a second fit does) takes the parameters as they are, rank 0's,
#: except where the ranks counted the step differently (setup's check refuses it on every rank,
#: step_check.abandoned_hint): a rank that abandoned the step cannot know that yet
WAYS_ON = (
    "set up again on every rank (a fit does; fit(resume=...) goes on from the last "
    "checkpoint's whole step) unless a rank abandoned this step that another counted (its "
    "finish_step failed: 'another rank abandoned the step'), which that setup refuses, naming "
    "it; or close the sync (it ends the job)"
)

#: the way on that a step refused after a setup every rank refused (a JobMismatch) names
AFTER_FAILED_SETUP = (
    "a step needs a setup that succeeds on every rank (the error names the difference, or "
    "why none can); or close the sync (it ends the job)"
)


class RankCollectives(StepNumbers, LocalSync):
    """A :class:`~distconv.sync.local.LocalSync` whose ranks meet on ``self.comm``.

    A subclass sets ``comm``, ``rank``, ``world_size``, ``_in_place``/``_op`` (``MPI.IN_PLACE``
    and ``MPI.SUM``, or None and None for a single-rank stand-in), ``_check`` (the ranks'
    exchange of where they are, on ``comm``), ``step`` (the steps it finished, as the run
    counts them: :class:`~.numbering.StepNumbers`), ``_open`` (what is under way, from setup
    or a step's start to its last collective; None between steps) and ``_changed_in`` (what
    was open when it began to change the parameters or their state: a setup, or a step's
    first update; None once that completed: until then they may hold it in part, and a setup
    whose job check failed, having changed nothing, keeps it).
    """

    comm: Any
    _in_place: Any
    _op: Any
    _check: StepCheck
    step: int
    _open: str | None
    _changed_in: str | None = None
    #: inside :meth:`setup`, whose first collective (:meth:`all_equal`'s) met the other ranks
    _setting_up = False
    #: inside :meth:`setup`, whether its job check's exchange was reached
    _job_met = False
    #: inside :meth:`setup`, its job check passed and how its state's making ended is untold
    _state_untold = False
    #: the error this rank's setup failed on before its job check, told to every other rank
    #: there (they raised a JobMismatch naming it; or one refusing the steps the ranks counted,
    #: :attr:`_refused_untold`, raised alike, none told), or the Ctrl-C ``fail_setup`` raised in its
    #: place once it was told, where a setup succeeded before: its close leaves with it
    #: propagating
    _told_failure: BaseException | None = None
    #: the refusal of the job check's exchange made for a setup that failed before it, where
    #: another rank was not in setup (at a meeting, in a step, closing), or the ranks counted
    #: different steps (a JobMismatch): the others were refused where they were, or in their
    #: check, not told the error (``fail_setup``'s Ctrl-C says so)
    _refused_untold: SyncError | None = None
    #: steps abandoned (``abandon_step``), which ``step`` does not count: setup's check says
    #: them, so a rank that finished (counted) a step another abandoned is named as the cause
    abandoned_steps = 0
    #: the step whose ``finish_step`` raised here after its check passed, until the others are
    #: told (:meth:`_tell_failed_step`, or a setup's check: :meth:`all_equal`)
    _failed_finish: int | None = None
    #: the ranks said which distconv each runs (:mod:`~.identity`), at their first setup
    _introduced = False
    #: the names in the order the first step fired them, and rank 0's, once recorded
    _first_pass: list[str]
    _recorded: tuple[str, ...]

    def setup(
        self,
        params: Sequence[Parameter],
        config: Mapping[str, Any] | None = None,
        state: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """:meth:`~distconv.sync.base.SyncStrategy.setup`, marked as under way: its job check
        opens with setup's own exchange, and its broadcast follows that check.

        An error raised here before the job check's exchange (the parameters refused, the
        job's description failing to build: maybe on this rank alone, a script catching it
        there) makes that exchange all the same, its description naming the error, then
        raises it: the other ranks raise a ``JobMismatch`` naming it at once, where they
        waited in the exchange until the watchdog's timeout (600 s). A rank that catches it
        and sets up again meets the others only where they set up again too: one that closes
        instead, no setup of its sync having succeeded, leaves without a last exchange (as
        after any setup every rank refused), and the setup made again waits for it until the
        watchdog's timeout. Set up again on every rank, or close."""
        self._setting_up, self._job_met, self._state_untold = True, False, False
        try:
            super().setup(params, config, state)
        except Exception as exc:  # not an interrupt: held in setup, raised once it is over
            if not self._job_met and self.world_size > 1:
                self._fail_before_check(exc)
            elif self._state_untold:  # after the check, before the broadcast: a bad checkpoint
                self._tell_state(exc)
            raise
        finally:
            self._setting_up = self._state_untold = False

    def _fail_before_check(self, error: BaseException) -> None:
        """Make the job check's exchange for a setup that raised ``error`` before it: a
        description of the error alone (under ``name``, which sorts first: the others'
        mismatch names it). Its own refusal there (the mismatch; or, where another rank is not
        in setup, the meeting's) is dropped: ``error``, raised next, is this rank's cause.
        Refused as a mismatch, every rank made the check: ``error`` is :attr:`_told_failure`.
        Refused as a meeting, or as a mismatch of the steps each rank counted (before the
        descriptions were compared), the others were refused, not told ``error``: its note
        says so, naming where each rank was, and :attr:`_refused_untold` holds it."""

        def exchange(text: str) -> None:
            try:
                self.all_equal(setup_failure_description(self.rank, text))
            except JobMismatch:  # every rank's, alike: none waits for this one
                self._told_failure = error
                raise

        self._refused_untold = tell_error(error, exchange, others_told(self.rank))
        if self._refused_untold is not None:
            add_note(error, untold(self._refused_untold))

    def _tell_state(self, error: Exception | None) -> None:
        """Between setup's job check and its broadcast, every rank says whether it made its
        optimizer state (``error``: why not; a checkpoint's state refused on rank 0, which
        alone is given it): the others waited in the broadcast until the watchdog's timeout
        (600 s) where one failed, or until its close aborted. A rank that failed raises its
        own error next; the others raise a SyncError naming it, and none broadcasts."""
        self._state_untold = False
        if self.world_size == 1:
            return
        if error is None:
            told = allgather_bytes(self.comm, b"")
            failed = next(((r, t) for r, t in enumerate(told) if t), None)
            if failed is not None:
                raise SyncError(
                    f"setup failed on rank {failed[0]} after the job check, before the "
                    f"parameters' broadcast: {failed[1].decode(errors='replace')}"
                )
            return
        told = "setup told the other ranks before its broadcast"
        tell_error(error, lambda text: allgather_bytes(self.comm, text.encode()), told)

    @property
    def steps_ended(self) -> int:
        """Steps finished (or failed in ``finish_step``) or abandoned: what the ranks agree on
        when they close after setup's check refused a step one abandoned and another counted
        (every collective of theirs complete: nobody waits, nobody need abort)."""
        return self._counted_step() + self.abandoned_steps

    @held
    def broadcast_parameters(self) -> None:
        """Copy rank 0's parameter values and optimizer state to every rank.

        Setup's broadcast follows :meth:`all_equal`'s exchange, which found every rank in setup.
        Called between steps it opens with an exchange of its own
        (:data:`~distconv.sync.mpi.step_check.BROADCAST`): MPI sends small broadcasts eagerly,
        so a rank that broadcast alone went on at once, and the others trained on their own
        parameters without a word.

        Raises:
            SyncError: called between steps, naming what each rank is doing where any differs;
                or called before setup, inside a step or after one that failed (see
                :meth:`_meet`).
        """
        if not self._setting_up:
            self._meet(BROADCAST)
        elif self._state_untold:  # every rank made its state, or none broadcasts
            self._tell_state(None)
        for p in self.params:
            self._bcast(p.value)
            for key in sorted(self.state[p.name]):
                self._bcast(self.state[p.name][key])

    def _bcast(self, array: Any) -> None:
        if self.world_size > 1:
            bcast_in_place(self.comm, array)

    @held
    def all_equal(self, description: Mapping[str, Any]) -> None:
        """Compare a digest of ``description`` across ranks; on a mismatch, name the difference.

        Setup's first collective. It opens with the ranks' exchange of where they are
        (:data:`~distconv.sync.mpi.step_check.SETUP`): a rank that sets up again, or late,
        while another is at a step or a meeting is named there, not left waiting in setup's
        blocking collectives, which match none of theirs. Outside setup (the Trainer compares
        its data so) it is a meeting between steps like the others; there, a description JSON
        cannot write (on this rank alone) is raised once the meeting is made all the same, its
        description naming the error: the others raise a JobMismatch saying it, where they
        waited in the meeting until the watchdog's timeout.

        Raises:
            SyncError: naming this rank, the first rank that differs, and the first differing
                key; or what each rank is doing, where a rank is not in setup; or, outside
                setup, called inside a step or after one that failed (see :meth:`_meet`).
        """
        # before the exchange: a value JSON cannot write (one that holds itself), on this rank
        # alone, raised after it left the others waiting in the digests' gather until the
        # watchdog's timeout; raised here, setup's check is made naming it (_fail_before_check),
        # and a meeting's is made as any other, the description naming it alone
        try:
            ours = as_sent(description)
        except Exception as exc:
            if not self._setting_up and self.world_size > 1:
                self._meet(SETUP)  # refused (raised) where this is no meeting's time
                failed = functools.partial(meeting_failure_description, self.rank)
                tell_error(
                    exc,
                    lambda text: same_job(self.comm, self.rank, failed(text)),
                    others_told(self.rank),
                )
            raise
        self._job_met = True  # setup's exchange reached (made, or raised as it was made)
        if self._setting_up:  # the step that failed here alone, if untold, said (and so told)
            if not self._introduced and self.world_size > 1:  # the fixed first collective
                introduce(self._check, self.rank)
                self._introduced = True
            failed, self._failed_finish = self._failed_finish, None
            self._settle_step()  # a step no rank took (its check refused): its number back
            self._check.say_setup(self.step, self.abandoned_steps, failed)
        else:
            self._meet(SETUP)
        same_job(self.comm, self.rank, ours)
        self._state_untold = self._setting_up  # passed: the state's making follows

    @held
    def allreduce_sum(self, values: Sequence[float]) -> list[float]:
        """Sum small metrics over every rank (float64), between steps."""
        buf = np.array([float(v) for v in values], dtype=np.float64)
        self._meet(SUMMING, len(buf))
        self.comm.Allreduce(self._in_place, buf, self._op)
        return buf.tolist()

    def state_dict(self) -> StateDict:
        """The optimizer state (see :meth:`~distconv.sync.local.LocalSync.state_dict`), as a
        checkpoint takes it, wherever the parameters hold a whole step.

        No parameter changes before ``finish_step`` updates them, and only where every rank
        finished the step (its flags, :mod:`~distconv.sync.mpi.updates`): inside a step before
        that, and after one abandoned (an error in backward, a Ctrl-C) or one whose
        ``finish_step`` failed before its first update (another rank abandoned it, a refused
        wire), every rank holds the last whole step, and its state is handed out. Where it
        failed on this rank alone (a gradient replaced here after it fired), the others
        updated: each rank hands out its own whole step, and a setup or a resume makes every
        rank hold rank 0's.

        Raises:
            SyncError: after a step whose update began and did not complete (an optimizer
                failed in ``finish_step``: the buckets before it updated, the later ones not),
                or a setup that failed: a checkpoint of that would resume every rank from a
                step applied in part. A setup (a second fit) ends the refusal: it takes the
                parameters as they are, rank 0's; one every rank refused (a JobMismatch, in
                its job check, before it changed anything) leaves it as it was.
        """
        if self._changed_in is not None and self.params:
            raise SyncError(
                f"no optimizer state in the middle of {self._changed_in}: it may hold a step "
                f"applied in part (the updates before a failed one are made); {WAYS_ON}"
            )
        return super().state_dict()

    @held
    def barrier(self) -> None:
        """Return once every rank has called it, between steps (the exchange of where they
        are is one)."""
        self._meet(BARRIER)

    def _meet(self, what: int, count: int = 0) -> None:
        """Check that every rank is at this meeting (``what``, with ``count`` values).

        Served after a setup every rank refused (a JobMismatch changed nothing, on every rank
        alike: the contract, :meth:`~distconv.sync.base.SyncStrategy.setup`); a step is not.

        Raises:
            SyncError: naming what each rank is doing, where any differs; or called before
                setup, inside a step (with the communication thread, the main thread makes no
                MPI call there) or after one that failed (the ranks may differ since).
        """
        if self._open is not None:
            self._tell_failed_step()
            said = where((what, self.step, count))
            raise meeting_refused(said, self._open)  # the words every transport says
        self._check.meet(what, self.step, count)

    def _tell_failed_step(self) -> None:
        """Once after this rank's ``finish_step`` raised (its update not made, or made in part),
        at the call it refuses next: say :data:`~.step_check.FAILED` in the exchange every
        step and meeting opens with. A rank whose ``finish_step`` succeeded went on to its next
        step or meeting; without this it trained on alone until this rank's close aborted the
        job (or the watchdog did): now it is refused there, naming this rank and its step."""
        failed, self._failed_finish = self._failed_finish, None
        if failed is not None:  # the others learn it; this rank raises its own refusal
            with contextlib.suppress(SyncError):
                self._check.meet(FAILED, self.step, failed)

    def _note_failed_step(self) -> None:
        """finish_step failed on this rank alone, every collective of the step complete: the
        other ranks may have finished it, so the next call this rank refuses tells them
        (:meth:`_tell_failed_step`). A failure every rank shares (a mismatch, a refused 16-bit
        wire, another rank's abandon) is not told: each rank knows it, and the setup they
        then call, which the others may call first, must meet no FAILED."""
        made: list[bool] = []
        try:
            self._record_first_pass(made)  # the others, past the step, wait in that exchange
        finally:  # told too where a Ctrl-C held through it is raised once it is made
            if made:
                self._failed_finish = self.step

    def _record_first_pass(self, made: list[bool] | None = None) -> None:
        """After the first step's collectives, on every rank that got past them (finished, or
        failed alone): rank 0's firing order, the next layout's, on every rank (a collective).
        ``made``: True appended once it is recorded (or was), before any Ctrl-C is raised.

        A Ctrl-C in that exchange (one that came as this rank waited there for a slower one:
        step 0's likeliest moment for it) is held until the order is recorded, then raised; one
        before it began (nothing made) is kept, the exchange made, then raised. Raised between
        its two collectives, it left the others waiting in the second; after them, the step
        open here: either way close aborted the job. Asked twice, raised at once."""
        made = [] if made is None else made
        if self._recorded:
            made.append(True)
            return
        kept: KeyboardInterrupt | None = None
        while not made:  # rank 0 fired nothing: () recorded, and made again at the next step
            began = False
            try:
                with HeldInterrupt():  # the first step only: no cost on a later one
                    began = True
                    self._recorded = rank0_names(self.comm, self._first_pass)
                    made.append(True)
            except KeyboardInterrupt as exc:
                if began or kept is not None:
                    raise
                kept = exc
        if kept is not None:
            raise kept
