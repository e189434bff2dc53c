"""finish_step's last pieces without the communication thread (last_pieces.finish_pieces): a
KeyboardInterrupt raised as a piece's Wait returns is kept and the Wait made again, so this rank
ends the step's collectives; one raised while a piece starts (its Iallreduce made, its request
not yet held by the pump: a SIGINT raised in the watchdog's wrapper of the request) is raised at
once. Made again, that start put a second Iallreduce of the piece on this rank alone: it met the
other ranks' next piece, whose sums it then mixed with this one's, and the last went unmatched."""

from __future__ import annotations

from typing import Any

import pytest

from distconv.sync.mpi import SingleRankComm
from distconv.sync.mpi.finishing import Finishing as StepEnd  # MPISync's, below its rate keeping
from distconv.sync.mpi.last_pieces import finish_pieces
from distconv.sync.mpi.pieces import PiecePump
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.used import UsedParams
from distconv.sync.mpi.watchdog import Watchdog, WatchedRequest
from tests.mpi.sign_off import interrupting
from tests.unguarded import unguarded

pytestmark = pytest.mark.timeout(30)


class Request:
    """A request that completes at its Wait, raising ``interrupt`` as its first returns."""

    def __init__(self, interrupt: BaseException | None) -> None:
        self.interrupt, self.waits = interrupt, 0

    def Wait(self) -> None:  # noqa: N802 - mpi4py's spelling
        self.waits += 1
        if self.waits == 1 and self.interrupt is not None:
            raise self.interrupt

    def Test(self) -> bool:  # noqa: N802
        return self.waits > 0


class Comm:
    """Records each piece started; ``at``: ``("start", k)`` raises an interrupt once piece k's
    Iallreduce is made, ``("wait", k)`` as its request's first Wait returns."""

    def __init__(self, at: tuple[str, int]) -> None:
        self.at, self.started, self.requests = at, [], []

    def Iallreduce(self, in_place: Any, piece: int, op: Any) -> Request:  # noqa: N802
        self.started.append(piece)
        hit = self.started.count(piece) == 1 and self.at[1] == piece
        request = Request(KeyboardInterrupt("wait") if hit and self.at[0] == "wait" else None)
        self.requests.append(request)
        if hit and self.at[0] == "start":
            raise KeyboardInterrupt("start")
        return request


def pump(comm: Comm) -> PiecePump:
    """Three pieces (piece k reduces ``k``), none arrived yet."""
    return PiecePump(comm, None, None, [lambda k=k: k for k in range(3)], [1, 1, 1], lambda: None)


@pytest.mark.parametrize("piece", [0, 1])
def test_an_interrupt_in_a_pieces_wait_is_kept_and_every_piece_goes_once(piece):
    comm, alone = Comm(("wait", piece)), []
    pieces = pump(comm)
    finish_pieces(pieces, alone)
    assert comm.started == [0, 1, 2]
    assert [str(e) for e in alone] == ["wait"]
    assert pieces.done


@pytest.mark.parametrize("piece", [0, 1])
def test_an_interrupt_in_a_pieces_start_is_raised_and_the_piece_not_started_again(piece):
    comm, alone = Comm(("start", piece)), []
    with pytest.raises(KeyboardInterrupt, match="start"):
        finish_pieces(pump(comm), alone)
    assert comm.started == list(range(piece + 1))  # each once: no collective on this rank alone
    assert alone == []


class Quiet(UsedParams):
    """The flags' exchange, complete at its start (no MPI)."""

    def _start(self) -> None:
        self._request = Request(None)


class Finishing:
    """What MPISync.finish_step reads of its sync without the thread, up to the last pieces: a
    rank of two whose check passed and whose buckets packed, its pieces on ``comm``."""

    world_size, step, sync_seconds, _thread, _in_step, closed = 2, 0, 0.0, None, True, False
    _grad_comm, buckets, _slot, _failed_finish = None, (), {}, None
    _check_refused = _ended_alike = False
    grad_hook, _total = None, 0  # no hook: the update call as without one
    _check = StepCheck(SingleRankComm())  # no Ctrl-C kept as start_step posted it

    def __init__(self, comm: Comm, watchdog: Watchdog | None = None) -> None:
        self._used, self._pump, self.told = Quiet(None, 2, None), pump(comm), 0
        self._watchdog = watchdog or Watchdog(None, print, 0)

    def _complete_check(self) -> None:
        pass

    def _launch_ready(self, everything: bool = False) -> None:
        pass

    def _apply(self, bucket: Any, used: Any) -> None:
        raise AssertionError("no bucket here")

    def _note_failed_step(self) -> None:
        self.told += 1


def test_finish_step_raises_an_interrupt_in_a_pieces_start_and_starts_it_once():
    """finish_step finishes its last pieces through finish_pieces: a Ctrl-C as piece 0 starts
    is raised, piece 0 made once. (Without the thread through to_the_end alone, it was made
    again: a collective on this rank alone.)"""
    comm = Comm(("start", 0))
    sync = Finishing(comm)
    with pytest.raises(KeyboardInterrupt):
        unguarded(StepEnd.finish_step)(sync)
    assert (comm.started, sync.told, sync.step) == ([0], 0, 1)
    assert not sync._ended_alike  # a piece's start interrupted: close aborts the job


class WatchedComm(Comm):
    """Pieces whose requests are watched by ``watchdog``, as the sync's communicator's are."""

    def __init__(self, watchdog: Watchdog) -> None:
        super().__init__(("wait", 0))  # piece 0's first Wait meets a Ctrl-C
        self.watchdog = watchdog

    def Iallreduce(self, in_place: Any, piece: int, op: Any) -> Any:  # noqa: N802
        request = super().Iallreduce(in_place, piece, op)
        return WatchedRequest(request, self.watchdog, f"the Wait of piece {piece}")


def test_a_second_interrupt_in_a_waits_sign_off_leaves_no_watchdog_entry():
    """A Ctrl-C in piece 0's Wait is kept (its Wait made again), a second one in its sign-off stops
    the rank: the watchdog's sign-off pops the entry however it is left. Before, the entry
    stayed, and a rank that went on without a watched call (a checkpoint saved after the
    interrupt) was stopped by the watchdog for a stall in a Wait long over."""
    watchdog = Watchdog(None, print, 0)  # watches nothing: no thread, the entries kept
    sync = Finishing(WatchedComm(watchdog), watchdog)
    with interrupting(("Wait",), after=2), pytest.raises(KeyboardInterrupt):
        unguarded(StepEnd.finish_step)(sync)
    assert not sync._ended_alike  # a collective left pending: close aborts the job
    assert sync._pump.request is not None  # piece 0's Wait was made twice, never ended
    assert watchdog._waits == {}
