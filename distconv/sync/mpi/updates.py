"""The step's end: each bucket's reduced gradients handed to the optimizer.

Every rank runs the same optimizer on the same sums, so every rank ends the step with
identical parameters. A parameter that fired on no rank is left alone; the ranks' flags
(:mod:`~distconv.sync.mpi.used`) say which.

All or none: among several ranks every bucket is reduced (and a 16-bit one checked), and the
flags are completed, before any is updated. The flags are the one word every rank sends from
``finish_step``: a bucket's sums can be whole while another rank abandons the step after its
pieces went (a step it then never takes), so only they tell that every rank finished it. A step
another rank abandoned, one refused (a NaN or infinity on a 16-bit wire, on every rank alike),
a reduction that fails (an MPI error) or a gradient replaced after it fired on some rank
(:func:`check_kept`: on the rank that replaced it; the others update; so does a bucket whose copy
back fails on one rank, raised there once the step's collectives are in) then leaves every
parameter as it was. With a communication thread the
optimizer thus no longer runs on a bucket while the later ones travel: the pieces stream during
backward, and at ``finish_step`` only the last ones, small, are left. On one rank, where no
other can abandon the step, each bucket is updated as soon as the thread has reduced it, and
the flags' wait, queued on the thread behind every piece, made at the first bucket holding a
parameter that did not fire. Should an update fail, the buckets before it are updated already:
the step cannot be finished, nor its optimizer state checkpointed; every collective of the step
is complete, so closing the sync leaves the job cleanly (:mod:`~distconv.sync.mpi.shutdown`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import numpy as np

from distconv.held_updates import UpdateHold
from distconv.notes import add_note
from distconv.sync.base import SyncError
from distconv.sync.mpi.buckets import Bucket
from distconv.sync.mpi.comm import WireRefused
from distconv.sync.mpi.held import HeldInterrupt
from distconv.sync.mpi.kept import keep, stopping, to_the_end
from distconv.sync.mpi.pieces import PiecePump
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import UsedParams

#: the optimizer on one reduced bucket, given the flags of the parameters that fired anywhere
#: (None: every parameter of the bucket did), and maybe the bucket's checked ``to_update``
Update = Callable[..., None]


def update_step(
    thread: CommThread | None,
    comm: Any,
    world_size: int,
    buckets: Sequence[Bucket],
    used: UsedParams,
    update: Update,
    slots: Mapping[str, Any],
    failed_alone: Callable[[], None] = lambda: None,
    alone: list[BaseException] | None = None,
    finished: list[bool] | None = None,
    begun: list[bool] | None = None,
    *,
    before: Callable[[list[Any]], None] | None = None,
) -> None:
    """Reduce every bucket (on ``thread`` if any, else on ``comm``) and ``update`` each: all of
    them or none (see above), except on one rank with the thread, no 16-bit bucket, no
    ``before`` and nothing kept in ``alone``, where each is updated once reduced. ``before``:
    called with the parameters about to be updated, every bucket's in layout order, once every
    bucket is reduced and copied back and the flags are in, before the first update (an error
    there is a failure of this rank alone, as an update's; a gradient it rebound is refused
    before any update, as one replaced after it fired). ``failed_alone`` is called before an
    error raised once every bucket and the flags are in (a replaced gradient, an optimizer's
    error): a failure of this rank alone, where every other rank may have finished the step (a
    bucket's copy back too, and an interrupt kept in ``alone``: :func:`reduce_all`).
    ``finished``: True appended once every update is made, before any Ctrl-C is raised after;
    ``begun``: once the reduction's own keeping of a Ctrl-C began (:func:`reduce_all`).

    Raises:
        SyncError: another rank abandoned the step, the thread failed (a 16-bit wire refused),
            or a gradient was replaced after it fired; no parameter updated.
    """
    # not with an interrupt kept (the flags' start, queued): reduce_all raises it once all is in
    as_reduced = thread is not None and world_size == 1 and not alone and before is None
    if as_reduced and not any(b.compressed for b in buckets):
        check_kept(buckets, used.local, slots)  # one rank: what fired here fired anywhere
        hold = UpdateHold()
        try:
            update_as_reduced(buckets, thread, used, update, hold)
        except BaseException:
            hold.drop()
            raise
        hold.end()  # a second Ctrl-C held over the updates: raised once they are whole
        return
    hold = UpdateHold()  # a second Ctrl-C never splits the update loop: held, raised after
    reduced: list[bool] = []  # every collective in, reduce_all returning: set as it returns
    try:
        flags = reduce_all(buckets, thread, comm, used, failed_alone, alone, reduced, begun)
        checked = check_kept(buckets, flags, slots)  # later buckets: checked again in update
        if before is not None:  # every gradient as the optimizer will read it, none read yet
            before([p for bucket in buckets for p in bucket.to_update(flags, slots)])
            checked = check_kept(buckets, flags, slots)  # one it rebound: refused, none updated
        hold.begin()
        for i, bucket in enumerate(buckets):
            update(bucket, flags, None if i else checked)
    except BaseException as exc:  # an interrupt in an update too: the others finished the step;
        hold.drop()
        if reduced:  # also one as reduce_all returned (else it told its own failure, if alone)
            _tell(failed_alone, exc)
        raise
    if finished is not None:  # no check since the try's last: appended, then a Ctrl-C raised
        finished.append(True)
    hold.end()


def reduce_all(
    buckets: Sequence[Bucket],
    thread: CommThread | None,
    comm: Any,
    used: UsedParams,
    failed_alone: Callable[[], None] = lambda: None,
    alone: list[BaseException] | None = None,
    reduced: list[bool] | None = None,
    begun: list[bool] | None = None,
) -> np.ndarray | None:
    """Every bucket reduced and unpacked, the flags completed; the flags
    (:meth:`~.used.UsedParams.complete`). ``alone``: this rank's failure so far, kept (an
    interrupt in the last pieces' wait: :func:`to_the_end`), treated as an unpack's below.
    ``reduced``: True appended as it returns the flags, with no call left to make in between:
    a Ctrl-C raised after that (in the caller, before its next call) is this rank's alone.
    ``begun``: True appended once a Ctrl-C is kept here (before, nothing was made).

    A SyncError (another rank abandoned the step, a 16-bit wire refused) is raised alike on
    every rank, at the same bucket. Any other error of an unpack (a device copy) is this rank's
    alone: it is raised once every later bucket is reduced, unpacked and checked and the flags
    are in (the other ranks wait in those collectives, then finish the step), after
    ``failed_alone`` (whose own error, if any, is raised instead, with it as its context; an
    interrupt is raised from that error instead: :func:`_tell`). Where a later bucket's error
    or the flags' refusal is raised instead (a SyncError, every rank's: with the thread, the
    flags are completed after the copies back; or an interrupt there: this rank's pack, kept by
    :meth:`~.used.UsedParams.fail`), a note there names it. A KeyboardInterrupt in
    an unpack is kept the same way (the other ranks' collectives come first), but wins over a
    kept error and over a later bucket's error or the flags' refusal, which is then its cause.
    So is one in the wait of the flags, of a reduction by hand, or, with the thread, of a
    bucket's reduction there (a Ctrl-C where a fast rank waits for a slow one): the wait is
    made again (:func:`to_the_end`), so this rank ends the step's collectives as the others do,
    and fails the step alone. So is one raised between those calls, in no wait and no held
    start (once a bucket is copied back, as a reduction by hand begins): what is left is made
    again (:func:`_reduce_rest`), nothing started twice. Before, it went up at once: a later
    16-bit bucket's collectives never started (the others waited in them), or, with the
    thread, the failure went untold and close aborted the job.
    """
    alone = [] if alone is None else alone
    by_hand: set[Bucket] = set()  # the buckets reduced by hand, each recorded while held
    try:  # a Ctrl-C between the calls (no wait's, no start held): kept, the rest made again
        while True:
            try:
                if begun is not None:  # kept from here (last_pieces.send_and_update)
                    begun.append(True)
                flags = _reduce_rest(buckets, thread, comm, used, alone, by_hand)
                break
            except KeyboardInterrupt as exc:  # asked twice, or the flags refused the step on
                if stopping(alone) or used.refused:  # every rank (this rank's pack among
                    raise  # them): nothing is left that another rank waits for
                keep(alone, exc)
    except BaseException as exc:  # a SyncError (every rank's), an MPI error, an interrupt (a wait,
        # this rank's pack kept by UsedParams.fail): this rank's in a note
        if stopping(alone):  # an interrupt: asked to stop
            _raise_from(alone[0], exc)
        if alone:
            add_note(exc, f"an earlier bucket's copy back failed on this rank too: {alone[0]!r}")
        raise
    if alone:
        try:
            raise alone[0]
        except BaseException as exc:  # as update_step: an error of failed_alone's raised from it
            _tell(failed_alone, exc)
            raise
    if reduced is not None:  # no check between the test above and the append (its call's)
        reduced.append(True)
    return flags


def _reduce_rest(
    buckets: Sequence[Bucket],
    thread: CommThread | None,
    comm: Any,
    used: UsedParams,
    alone: list[BaseException],
    by_hand: set[Bucket],
) -> np.ndarray | None:
    """:func:`reduce_all`'s collectives and copies back, safe to make again after a Ctrl-C
    raised between them: each wait returns at once once complete (:func:`to_the_end` keeps
    one in it), the flags once read are not read again (their value then unused: the kept
    interrupt is raised), a bucket in ``by_hand`` is not reduced again, and a copy back done
    is not made again (:meth:`~.buckets.Bucket.unpack`). Made again, a collective started
    twice would meet another of the other ranks' (a hang, then an abort)."""
    # a wait's interrupt: kept in alone, the wait made again (to_the_end); the flags' own (this
    # rank's pack, UsedParams.fail) is raised once they are not pending. No object made per
    # bucket: the healthy path pays one call per wait
    pending = lambda: used.pending  # noqa: E731 - read after an interrupt only
    # the flags first without the thread (the others' FAILED wins over what was kept)
    flags = None if thread is not None else to_the_end(used.complete, alone, pending=pending)
    for bucket in buckets:
        if thread is not None:  # waiting on an event: made again, it returns once set
            to_the_end(_wait, alone, thread, bucket)
        elif not bucket.pieces and bucket not in by_hand:  # a 16-bit wire, reduced by hand
            _by_hand(bucket, comm, alone, by_hand)
        _unpack(bucket, alone)
    if thread is not None:  # on the thread, behind every piece; a refusal every rank shares
        # (another rank's failed pack) does not swallow what was kept
        flags = to_the_end(used.complete, alone, pending=pending)
    return flags


def _by_hand(bucket: Bucket, comm: Any, alone: list[BaseException], done: set[Bucket]) -> None:
    """Reduce the 16-bit ``bucket`` by hand (:meth:`~.buckets.Bucket.reduce`), a Ctrl-C held
    from each collective's start until its wait begins (:class:`~.held.HeldInterrupt`), then
    kept in ``alone`` as one in that wait is (:func:`to_the_end`). Raised between, it lost the
    started collective: this rank never started the next one, which the others wait in. So is
    one that comes unheld around the wait (after the release, before the wait's own keeping
    begins; after the wait, before the next start is held): the wait made again (at once,
    once complete), the next start held. Once reduced, ``bucket`` is added to ``done``
    while the last hold lasts: a Ctrl-C raised after it is not one before the first start."""
    held, here = HeldInterrupt(), sys._getframe()

    def release() -> None:  # the held Ctrl-C, if one came: kept, unless asked twice
        try:
            held.__exit__()
        except KeyboardInterrupt as exc:
            if stopping(alone):
                raise
            keep(alone, exc)

    def wait(request: Any) -> None:
        while True:  # no instruction unheld outside this try: a Ctrl-C there is kept too
            try:
                release()
                to_the_end(request.Wait, alone)
                held.__enter__(here)  # the next start (after a local sum)
                return
            except KeyboardInterrupt as exc:  # unheld, outside the wait's: made again
                if stopping(alone):
                    raise
                keep(alone, exc)

    held.__enter__(here)  # a Ctrl-C before it: nothing started, reduce_all makes this again
    try:
        bucket.reduce(comm, wait, None, None)
        done.add(bucket)  # held: recorded before any Ctrl-C is raised
    finally:
        release()


def _tell(failed_alone: Callable[[], None], error: BaseException) -> None:
    """Call ``failed_alone`` while ``error``, this rank's failure alone, is handled: an error of
    its own is raised instead, ``error`` its context, but for an interrupt (not an Exception),
    which is raised from that error: what was asked is to stop."""
    try:
        failed_alone()
    except Exception as told:
        if isinstance(error, Exception):
            raise
        _raise_from(error, told)


def _raise_from(interrupt: BaseException, error: BaseException) -> NoReturn:
    """Raise ``interrupt`` from ``error``, raised while it was kept or handled. Raising it sets
    its context to ``error``: a copy back's error it replaced (:func:`_unpack`: its context then)
    goes behind ``error`` instead, so it is not dropped from what is shown."""
    replaced = interrupt.__context__
    if replaced is not None and error.__context__ in (None, interrupt):
        error.__context__ = replaced
    raise interrupt from error


def refused_alike(error: BaseException) -> bool:
    """Whether ``error``, raised by ``finish_step``, is a 16-bit wire's refusal (or an interrupt
    kept until then, raised from it: :func:`reduce_all`): every rank refused the step at the
    same bucket (the ranks hold the same bits), none waits for another. Without the
    communication thread every earlier collective and the flags were complete, and no rank
    starts a later one. With it, what every rank's thread does after is alike too: a refusal
    on the thread skips what it had queued, one on the main thread (a device bucket's unpack)
    leaves the thread to reduce the later buckets on every rank; either way the flags were
    started on every rank, and close completes them (:func:`~.clean_leave.leave`). Before,
    with the thread, close aborted the job, a traceback on every rank."""
    return WireRefused in (type(error), type(error.__cause__))


def _unpack(bucket: Bucket, alone: list[BaseException]) -> None:
    """Unpack ``bucket``; an error other than a SyncError (the 16-bit wire's check, made alike on
    every rank), a KeyboardInterrupt too, is kept in ``alone`` (:func:`keep`), not raised; but
    an interrupt where one is kept already (asked twice: stop at once, as :func:`to_the_end`)."""
    try:
        bucket.unpack()
    except SyncError:
        raise
    except BaseException as exc:  # this rank's alone: the other ranks' collectives come first
        if stopping(alone) and not isinstance(exc, Exception):
            raise
        keep(alone, exc)


def check_kept(
    buckets: Sequence[Bucket], flags: np.ndarray | None, slots: Mapping[str, Any]
) -> list[Any] | None:
    """Before the step's first update: the gradient of every parameter that fired on some rank
    (``flags``, as :meth:`~.buckets.Bucket.to_update` reads them) is still its bucket's view,
    so a replaced one fails the step with no parameter updated, not after the buckets before
    it were. Returns the first bucket's ``to_update`` (None: none), for its update, made next.

    Raises:
        SyncError: naming the first parameter whose gradient was replaced after it fired.
    """
    first = [bucket.to_update(flags, slots) for bucket in buckets]
    return first[0] if first else None


def update_as_reduced(
    buckets: Sequence[Bucket],
    thread: CommThread,
    used: UsedParams,
    update: Update,
    hold: UpdateHold | None = None,
) -> None:
    """One rank with the communication thread: each bucket updated once it is reduced;
    ``hold`` begun before the first update (one rank: the waits after it are local)."""
    flags, waited = None, False
    for bucket in buckets:
        _reduced(thread, bucket)
        if bucket.pending and not waited:  # a parameter that did not fire
            flags, waited = used.complete(), True
        if hold is not None:
            hold.begin()
        update(bucket, flags if bucket.pending else None)
    if not waited:
        used.complete()  # MPI must see the exchange complete


def _reduced(thread: CommThread, bucket: Bucket) -> None:
    """Wait until the thread has reduced ``bucket``, then unpack it (a device bucket here, on
    the main thread, which owns the device; once a step): a 16-bit wire is checked by then."""
    _wait(thread, bucket)
    bucket.unpack()


def _wait(thread: CommThread, bucket: Bucket) -> None:
    """Wait until the thread has reduced ``bucket``."""
    if bucket.pieces or bucket.compressed:  # an empty bucket has no request
        thread.wait(bucket)


def drain_abandoned(pump: PiecePump, used: UsedParams) -> None:
    """Send what an abandoned step left of its pieces and complete them (:meth:`PiecePump.drain`:
    on the communication thread, if the pump hands its pieces to one). A rank that abandoned the
    step before another left the other's allreduce unmatched: its thread waited there until
    setup gave up (30 s); without one, the request was dropped pending, its buffer freed under
    MPI. Every rank sends every piece, so every one completes; the sums are dropped (the
    parameters hold gradients of their own since). What the thread unpacks is checked as in a
    step (:meth:`~.buckets.Bucket.check_wire`): a 16-bit wire that holds infinity stops it, and
    every reduction after, on every rank alike (they hold the same bits). The buckets are not
    marked unpacked to skip that: the thread may still be inside one, and a rank whose thread
    then skipped the check, where another's had refused it, sent the next piece alone. The
    step's used-parameter flags are owed too (:meth:`~.used.UsedParams.abandoned`)."""
    pump.drain()
    used.abandoned()
