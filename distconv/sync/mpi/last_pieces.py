"""The step's last pieces and the flags onto the wire, then the reduction and the updates
(:mod:`~distconv.sync.mpi.updates`), a Ctrl-C between them kept as one in a wait is."""

from __future__ import annotations

from collections.abc import Callable

from distconv.sync.mpi.kept import keep, stopping, to_the_end
from distconv.sync.mpi.pieces import PiecePump
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import UsedParams


def send_and_update(
    used: UsedParams,
    thread: CommThread | None,
    pump: PiecePump,
    alone: list[BaseException],
    world_size: int,
    update: Callable[[list[bool]], None],
    entered: list[bool],
) -> None:
    """:func:`send_last`, then ``update(begun)`` (:func:`~.updates.update_step`), which appends
    to ``begun`` once the reduction's own keeping began (:func:`~.updates.reduce_all`). A
    Ctrl-C raised between (the last pieces gone, nothing of the reduction made: no wait's
    keeping, no start held) is kept in ``alone`` as a wait's, and both made again: nothing is
    sent twice (:func:`send_last`), and the reduction ends the step's collectives as on the
    other ranks, then raises it (the step failed on this rank alone). Before, it went up: the
    others waited in collectives this rank never completed, and its close aborted the job.
    Raised at once: one rank (nobody waits), or one :func:`send_last` raises itself.
    ``entered``: True appended once this keeping began (a Ctrl-C before it, as this was
    called, is the caller's to keep: ``MPISync.finish_step``)."""
    while True:
        begun: list[bool] = []
        try:
            entered.append(True)
            send_last(used, thread, pump, alone)
            # every piece queued before the flags' wait: else the thread, blocked there, would
            # never start a piece the other ranks wait for
            assert pump.done, "the flags' wait is queued before the step's last piece"
            update(begun)
            return
        except KeyboardInterrupt as exc:
            if begun or world_size == 1 or stopping(alone) or used.start_unknown or pump.starting:
                raise
            keep(alone, exc)


def send_last(
    used: UsedParams, thread: CommThread | None, pump: PiecePump, alone: list[BaseException]
) -> None:
    """Start the flags (:meth:`~.used.UsedParams.post`) and send the step's last pieces, to
    the end (:func:`finish_pieces`) or to ``thread`` (:meth:`~.pieces.PiecePump.finish`). A
    Ctrl-C raised between those calls (the flags' start returned, no last piece gone) is kept
    in ``alone`` as a wait's, and what is left made again: the flags are not started twice
    (:attr:`~.used.UsedParams.started`, recorded while the start is held), nor a piece (the
    pump's cursor and request, recorded while each start is held). Before, it went up at once:
    the other ranks waited for the pieces this rank never sent, until the watchdog aborted.
    Raised at once, as before: one asked twice, one the flags' start raised (started or not,
    unknown), and one a piece's start raised before it was recorded (``pump.starting``: made
    again, it could be a collective on this rank alone)."""
    while True:
        try:
            if not used.started:
                used.post(thread, alone)
            if thread is None:
                finish_pieces(pump, alone)
            else:
                pump.finish()
            return
        except KeyboardInterrupt as exc:
            if stopping(alone) or used.start_unknown or pump.starting:
                raise
            keep(alone, exc)


def finish_pieces(pump: PiecePump, alone: list[BaseException]) -> None:
    """Without the thread, the step's last pieces onto the wire and waited for
    (:meth:`~.pieces.PiecePump.finish`), to the end (:func:`to_the_end`, keeping an interrupt
    in ``alone``): only while a piece is on the wire, its request held by ``pump``, so the
    interrupt came from its Wait (made again, it returns at once). One raised with none there,
    where a piece's Iallreduce may be made and its request lost (a Ctrl-C in the watchdog's
    wrapper), is raised at once: made again, that start would put a collective on this rank
    alone, which meets another piece of the other ranks'."""
    to_the_end(pump.finish, alone, pending=lambda: pump.request is not None)
