"""The ranks' agreement on where they are: at each step, and at every job-level meeting.

:class:`~distconv.sync.mpi.sync.MPISync` posts one small non-blocking ``Iallgather`` of
``(step, layout hash and learning rate, examples)`` when a step starts and completes it just
before the step's first gradient collective. By then it has long arrived, so the ranks meet
once a step, at the gradients, not twice; and a rank that disagrees is named there, on every
rank, before any of them can hang in a reduction of another size, or apply the step's sum at
a rate of its own (the rate rides in the layout's number: :mod:`~.step_agreement`).

Every other meeting on the job communicator (setup's job check, a metrics sum, the barrier, a
broadcast of rank 0's parameters between steps, a rank closing) starts with the same exchange, a
code in place of the step (:data:`SETUP`, :data:`SUMMING`, :data:`BARRIER`, :data:`BROADCAST`,
:data:`CLOSED`); a rank whose ``finish_step`` raised says :data:`FAILED` at its next call. MPI
matches collectives by their order alone, so ranks that disagree on what comes next (one sums
metrics after two steps while another starts a third, closes, or sets up again) would otherwise
wait in collectives that never match, or worse, match ones of the same shape. With every
meeting opening alike, they meet in this exchange, and each rank that sees the difference names
what each is doing. (Two sums of as many values after as many steps look alike: callers sum in
the same order on every rank.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from distconv.sync.base import SyncError
from distconv.sync.closing import after_steps, summing
from distconv.sync.mpi.comm import JobMismatch
from distconv.sync.mpi.held import HeldInterrupt
from distconv.sync.mpi.step_agreement import step_digest, step_mismatch

#: in place of a step number: the rank closes its sync (then the steps it finished, and 1 + the
#: step whose ``finish_step`` failed on it alone, untold, or 0: :meth:`StepCheck.say_closed`)
CLOSED = -1
#: in place of a step number: the rank sums metrics (then its steps, and how many values)
SUMMING = -2
#: in place of a step number: the rank waits at the barrier (then its steps)
BARRIER = -3
#: in place of a step number: the rank compares the job, as setup does first (then its steps,
#: and in setup the steps it abandoned, below :data:`FAILED_SHIFT`: :meth:`StepCheck.say_setup`)
SETUP = -4
#: in place of a step number: the rank broadcasts rank 0's parameters between steps (then its
#: steps)
BROADCAST = -5
#: in place of a step number: the rank's ``finish_step`` raised after the step's check passed
#: (then its steps, and the step that failed): it refuses every step and meeting until a setup
FAILED = -6
#: setup's count holds, from this bit up, how many steps back the step whose ``finish_step``
#: failed on the rank alone, untold, is (1: the last), or 0 (:meth:`StepCheck.say_setup`); the
#: steps it abandoned below it
FAILED_SHIFT = 32


def where(row: Sequence[int]) -> str:
    """What a rank said it is doing, in words: a step, or a meeting after some steps."""
    what, steps, count = row
    if what >= 0:
        return f"step {what}"
    after = after_steps(steps)
    if what == CLOSED:  # count: 1 + the step that failed on it alone (say_closed), or 0
        return f"closed {after}{_failed_alone(count)}"
    if what == SUMMING:
        return f"{summing(count)} {after}"
    if what == BARRIER:
        return f"at the barrier {after}"
    if what == SETUP:  # count: the steps it abandoned (abandoned_hint), and (say_setup) how
        # far back the step that failed on it alone is, above them
        abandoned = f" ({_abandoned(row)} abandoned)" if _abandoned(row) else ""
        back = count >> FAILED_SHIFT
        failed = _failed_alone(steps - back + 1 if back > 0 else 0)
        return f"comparing the job (setup's check) {after}{abandoned}{failed}"
    if what == BROADCAST:
        return f"broadcasting rank 0's parameters {after}"
    if what == FAILED:
        return f"failed in finish_step of step {count} (it takes no step until a setup)"
    return f"unknown code {what}"


def _failed_alone(said: int) -> str:
    """``said``: 1 + the step whose ``finish_step`` failed on the rank alone, or 0."""
    return f" (its finish_step of step {said - 1} failed)" if said > 0 else ""


def _abandoned(row: Sequence[int]) -> int:
    """The steps a rank in setup's check abandoned (below :data:`FAILED_SHIFT`)."""
    return row[2] & ((1 << FAILED_SHIFT) - 1)


def _setup_compared(row: Sequence[int]) -> tuple[int, ...]:
    """What ranks in setup's check (or at another :data:`SETUP` meeting) must agree on: all
    but the step that failed alone (:meth:`StepCheck.say_setup`)."""
    return (row[0], row[1], _abandoned(row))


def abandoned_hint(rows: Sequence[Sequence[int]]) -> str:
    """Why ranks in setup's check counted different steps, where abandoned steps (the rows'
    third column) make up the difference: one rank abandoned a step another counted (its
    ``finish_step`` failed there, or completed)."""
    steps = [row[1] for row in rows]
    if len({row[1] + _abandoned(row) for row in rows}) > 1 or len(set(steps)) == 1:
        return ""
    most = max(steps)
    behind = [r for r, s in enumerate(steps) if s < most]
    counted = ", ".join(f"rank {r}" for r, s in enumerate(steps) if s == most)
    said = "; ".join(
        f"rank {r} abandoned {most - steps[r]} step{'s' if most - steps[r] != 1 else ''} "
        f"that {counted} counted"
        for r in behind
    )
    return (
        f"; {said} (finished, or failed in finish_step): the ranks' steps, and maybe their "
        "parameters, differ since, so the job cannot go on; close the sync and start again "
        "from a checkpoint"
    )


def steps_apart(refusal: BaseException) -> bool:
    """Whether ``refusal`` is setup's check refused in its steps' exchange
    (:meth:`StepCheck.say_setup`): every rank was in its check, but they counted different
    steps, so it was raised before the ranks' descriptions were compared (a JobMismatch all
    the same): no rank saw another's, nor the error a failed setup's description names."""
    return isinstance(refusal, JobMismatch) and getattr(refusal, "steps_apart", False) is True


class StepCheck:
    """One step's exchange on ``comm``: :meth:`post`, then :meth:`complete` (or :meth:`drain`);
    or a meeting between steps: :meth:`meet`."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self._request: Any = None
        # the row sent and every rank's rows, the same two buffers at every exchange (one is
        # pending at a time): a numpy call just after an MPI wait costs several times its usual
        # time on a busy core, and the exchange is read back as plain ints for the same reason
        self._mine = np.zeros(3, dtype=np.int64)
        self._every = np.zeros((comm.Get_size(), 3), dtype=np.int64)
        self._step = 0
        self._layout: Mapping[str, Any] = {}
        self._lr: float | None = None  # the rate the posted step said (None: none said)
        # a step's exchange posted but not yet checked: an interrupt raised once its Wait has
        # returned (a SIGINT that came while this rank waited for a slower one) leaves it so,
        # and the next complete() still checks it (the other ranks have passed it, or not)
        self._unread = False
        #: a layout mismatch named as a Ctrl-C came (raised in its place): the next complete's
        self._refusal: SyncError | None = None
        self._held = HeldInterrupt()
        #: a Ctrl-C held as :meth:`post` started the step's exchange (:meth:`raise_kept`)
        self.kept: KeyboardInterrupt | None = None

    @property
    def pending(self) -> bool:
        """Whether a posted exchange has not been completed yet."""
        return self._request is not None

    def post(
        self,
        step: int,
        layout: Mapping[str, Any],
        layout_hash: int,
        examples: int,
        lr: float | None = None,
    ) -> None:
        """Start the exchange of this rank's step, layout hash, learning rate and examples.

        ``lr``: the rate this rank's optimizer applies the step's sum at, which every rank's
        must equal bit for bit (:mod:`~distconv.sync.rate_agreement`); None compares none.

        A Ctrl-C as it starts is held until its request is stored, then kept in :attr:`kept`,
        not raised: raised here, the step would never begin on this rank while the others go
        on into its collectives (they wait there, and close aborts the job). One that came
        before the start is raised: nothing was started."""
        self.kept = None
        try:
            self._start([step, step_digest(layout_hash, lr), examples], (step, layout, lr))
        except KeyboardInterrupt as exc:
            if self._request is None:
                raise
            self.kept = exc

    def keep(self, interrupt: KeyboardInterrupt) -> None:
        """Keep ``interrupt``, raised once :meth:`post` started the exchange (as it returned),
        as :meth:`post` keeps one in it. Raised: where nothing was started, or one is kept
        already (asked twice: stop at once)."""
        if self._request is None or self.kept is not None:
            raise interrupt
        self.kept = interrupt

    def raise_kept(self) -> None:
        """Raise the Ctrl-C :meth:`post` kept, if any (once): ``finish_step`` does, once the
        step's buckets went, so that the used-parameter flags tell every rank to refuse the
        step (:meth:`~.used.UsedParams.fail`)."""
        kept, self.kept = self.kept, None
        if kept is not None:
            raise kept

    def kept_over(self, error: BaseException) -> BaseException:
        """What ``finish_step`` raises for ``error``: the Ctrl-C :meth:`post` kept, if any
        (taken, ``error`` its context: what was asked is to stop), else ``error``. A bucket's
        pack that failed before :meth:`raise_kept` otherwise dropped it."""
        kept, self.kept = self.kept, None
        if kept is None or kept is error:
            return error
        kept.__context__ = error
        return kept

    def _start(
        self, row: list[int], step: tuple[int, Mapping[str, Any], float | None] | None = None
    ) -> None:
        if self._request is not None:  # MPI still owns the buffers: never post over them
            raise SyncError(f"no exchange ({where(row)}) while step {self._step}'s check is open")
        self._mine[:] = row
        with self._held:  # a Ctrl-C raised once the request is stored, for drain to complete
            self._request = self.comm.Iallgather(self._mine, self._every)
            if step is not None:
                (self._step, self._layout, self._lr), self._unread = step, True
                self._refusal = None

    def complete(self) -> int | None:
        """Wait for the exchange and check it.

        A call interrupted after the exchange's Wait returned (a KeyboardInterrupt) leaves the
        step unchecked: the next call checks it, as this one would have; so does one
        interrupted as it names a mismatch (before, marked read first: the next call returned
        None, and the rank took a step every other rank refused for checked).

        Returns:
            The step's examples summed over the ranks, or None when it was checked already
            (or none was posted).

        Raises:
            SyncError: the ranks are at different steps (or meetings), lay out their buckets
                differently, or train at different learning rates.
        """
        if self._refusal is not None:  # a layout mismatch's, named as a Ctrl-C came
            refusal, self._refusal = self._refusal, None
            raise refusal
        if not (self.drain() or self._unread):
            return None
        steps, digests, examples = zip(*self._every.tolist())  # plain ints: a few rows
        try:  # checked, said once on every rank alike: marked read only as it is raised
            if len(set(steps)) > 1:
                self._raise_elsewhere()
            if len(set(digests)) > 1:
                self._raise_step_mismatch()
            total = sum(examples)
        except SyncError:  # (no call between: no Ctrl-C raised there)
            self._unread, self._refusal = False, None
            raise
        self._unread = False
        return total

    def meet(self, what: int, steps: int, count: int = 0) -> None:
        """Open a meeting between steps: every rank must say the same ``what`` (a code, such
        as :data:`SUMMING`), after the same number of ``steps``, with the same ``count``.

        Raises:
            SyncError: naming what each rank is doing, where any differs.
        """
        # SETUP outside setup (the Trainer compares its data so) meets setup's check alike
        self._exchange([what, steps, count], _setup_compared if what == SETUP else list)

    def say_setup(self, steps: int, abandoned: int, failed: int | None = None) -> None:
        """Setup's exchange (a meeting, :data:`SETUP`), after ``steps`` steps and ``abandoned``
        abandoned ones, which every rank must say alike.

        ``failed``: the step whose ``finish_step`` failed on this rank alone, which no rank was
        told yet (as :meth:`say_closed`'s): a rank that finished that step and went on is
        refused naming it here; ranks that all set up agree whatever each says of it. It is
        said as how far back it is (``steps - failed``: 1, the last step, every later one
        refused until a setup), not as its number, which from step 2**31 - 1 on overflowed the
        exchange's int64 above the abandoned steps' 32 bits.

        Raises:
            SyncError: naming what each rank is doing, where any differs (a JobMismatch where
                every rank is in setup's check).
        """
        said = abandoned + ((0 if failed is None else steps - failed) << FAILED_SHIFT)
        self._exchange([SETUP, steps, said], _setup_compared)

    def say_rows(self, row: Sequence[int]) -> list[list[int]]:
        """Say ``row`` to every rank, waited for at once, and return every rank's row unread:
        the start-up record's exchange (:mod:`~distconv.sync.mpi.identity`), which reads them."""
        self._start(list(row))
        self.drain()
        return self._every.tolist()

    def say_closed(self, steps: int, failed: int | None = None) -> BaseException | None:
        """The last exchange, when this rank closes after ``steps`` steps: every other rank
        closes too, or is named where it is (it would otherwise wait there forever).

        ``failed``: the step whose ``finish_step`` failed on this rank alone, which no rank was
        told yet (an optimizer's error, a Ctrl-C kept: ``_note_failed_step``). A rank that
        finished that step and went on is refused naming it here, not only this rank's close;
        ranks that all close agree whatever each says of it (the count column is not compared).

        Returns:
            What a signal's handler raised as the exchange's Wait returned or its rows were
            read (not an Exception: a SystemExit; close holds SIGINT and SIGTERM, so another
            signal's: ``clean_leave._leave``), for the caller to raise now that every rank has
            made it (raised there, it left the exchange pending on this rank, and close
            aborted the job, a rank that closed first and went on killed with it); else None.

        Raises:
            SyncError: another rank is still at a step, or in another meeting.
        """
        said = 0 if failed is None else failed + 1
        return self._exchange([CLOSED, steps, said], lambda row: row[:2], through=True)

    def _exchange(
        self,
        row: list[int],
        compared: Callable[[list[int]], Sequence[int]],
        through: bool = False,
    ) -> BaseException | None:
        """Say ``row`` to every rank; name what each is doing where what is ``compared`` of a
        rank's row differs from this one's. ``through``: waited for and checked through a
        signal's handler that raises (:meth:`_through`), whose stop is returned."""
        self._start(row)

        def made() -> None:
            self.drain()  # made again: returns at once once the request is waited for
            if any(compared(other) != compared(row) for other in self._every.tolist()):
                self._raise_elsewhere()

        if through:
            return self._through(made)
        made()
        return None

    @staticmethod
    def _through(work: Callable[[], object]) -> BaseException | None:
        """``work()``, made again until it returns or raises an Exception (a mismatch named:
        raised, for the caller's abort, the stop dropped); the first stop raised meanwhile
        (a second one dropped for it) returned. One that comes as the first is caught, before
        the loop goes round (where Python runs handlers, outside the try), still escapes: at
        close, another signal's than SIGINT's and SIGTERM's, held there (``clean_leave._leave``)."""
        stop: BaseException | None = None
        while True:
            try:
                work()
                return stop
            except Exception:
                raise
            except BaseException as exc:  # a Wait on a completed request returns at once
                stop = stop or exc

    def drain(self) -> bool:
        """Wait for a pending exchange without checking it (MPI must see every posted
        collective complete); whether one was pending."""
        if self._request is None:
            return False
        # cleared once waited for: an interrupt raised as the Wait returns leaves the request
        # for the next call, where a Wait on a completed request returns at once
        self._request.Wait()
        self._request = None
        return True

    def _raise_elsewhere(self) -> None:
        rows = self._every.tolist()
        named = ", ".join(f"rank {r}: {where(row)}" for r, row in enumerate(rows))
        closed = any(row[0] == CLOSED for row in rows)
        hint = "; a rank closed its sync while another went on" if closed else ""
        said = f"ranks are at different points of the job ({named}){hint}"
        if any(row[0] != SETUP for row in rows):
            raise SyncError(said)
        # every rank in setup's check raises this alike, with nothing else pending: none waits
        # for another (JobMismatch), so each says it before a close aborts the job
        mismatch = JobMismatch(said + abandoned_hint(rows))
        mismatch.steps_apart = True  # before the descriptions: no rank saw another's
        raise mismatch

    def _raise_step_mismatch(self) -> None:
        """Name how the ranks' layouts or rates differ (:func:`~.step_agreement.step_mismatch`)
        and raise it; kept for the next complete where a Ctrl-C came as it was named."""
        # held from the exchange read to the refusal kept: a Ctrl-C in the two gathers (made
        # once, on every rank: between them, the others waited in the second) is raised once
        # both are made, and the next complete raises the refusal (before, it returned None)
        with self._held:  # a Ctrl-C before the hold: unread still, the next complete gathers
            self._unread = False
            rank = self.comm.Get_rank()
            self._refusal = step_mismatch(self.comm, rank, self._step, self._layout, self._lr)
        raise self._refusal
