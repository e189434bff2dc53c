"""HeldInterrupt (distconv.sync.mpi.held), the stretch in which a gradient piece is started and
recorded: a SIGINT there is handled once it is left, by the handler it found, which it puts
back; with another thread alive, as a process-directed SIGINT (``os.kill``) reaches one when
the main thread blocks it. One process, real signals."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from distconv.stop_request import StopRequest
from distconv.sync.mpi import SingleRankComm, held
from distconv.sync.mpi.held import HeldInterrupt
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import UsedParams
from tests.mpi.common import bucket_params, bucket_sync, fire
from tests.mpi.run_start_interrupt import interrupted_after

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def sigint() -> Iterator[None]:
    """Python's own SIGINT handler for the test (a runner may hold another), then put back;
    and another thread alive for the test's length, SIGINT not blocked there."""
    before, stop = signal.signal(signal.SIGINT, signal.default_int_handler), threading.Event()
    other = threading.Thread(target=stop.wait, args=(30,), daemon=True)
    other.start()
    try:
        yield
    finally:
        stop.set()
        other.join()
        signal.signal(signal.SIGINT, before)


def ctrl_c_then_finish(done: list[str]) -> None:
    """A SIGINT to this process, then a sleep (its handler runs there, on EINTR), then the
    stretch's last work: ``done`` says it."""
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)
    done.append("recorded")


def test_a_ctrl_c_inside_is_raised_on_leaving_once_the_work_is_done(sigint):
    held, done = HeldInterrupt(), []
    with pytest.raises(KeyboardInterrupt):
        with held:
            ctrl_c_then_finish(done)
    assert done == ["recorded"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with held:  # used again, no Ctrl-C: nothing raised, the handler back
        done.append("again")
    assert done == ["recorded", "again"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_that_does_not_raise_is_called_once_after(sigint):
    """As ``distconv.stop_request``'s first Ctrl-C: noted, the step goes on."""
    calls: list[tuple[int, bool]] = []
    signal.signal(signal.SIGINT, lambda signum, frame: calls.append((signum, frame is not None)))
    done: list[str] = []
    with HeldInterrupt():
        ctrl_c_then_finish(done)
        assert calls == []
    assert (done, calls) == (["recorded"], [(signal.SIGINT, True)])


def test_ignored_sigint_stays_ignored(sigint):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    done: list[str] = []
    with HeldInterrupt():
        ctrl_c_then_finish(done)
    assert done == ["recorded"]
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_off_the_main_thread_it_does_nothing(sigint):
    """Python runs no SIGINT handler there (and may not set one): the communication thread's
    starts need none."""
    held, seen = HeldInterrupt(), []

    def body() -> None:
        with held:
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]


def test_a_second_ctrl_c_inside_still_stops_at_once(sigint):
    """``distconv.stop_request``'s handler takes a first Ctrl-C as "stop at the next agreed
    step" and a second as "stop now" (KeyboardInterrupt): two inside the stretch are handled as
    two on leaving, not folded into one request the user must repeat."""
    stop = StopRequest(announce=False)
    restore = stop.install()
    try:
        done: list[str] = []
        with pytest.raises(KeyboardInterrupt):
            with HeldInterrupt():
                ctrl_c_then_finish(done)
                ctrl_c_then_finish(done)
        assert done == ["recorded", "recorded"]
        assert stop.received == {signal.SIGINT}
    finally:
        restore()


def test_a_sigterm_held_beside_a_ctrl_c_is_raised_once_the_work_is_done(sigint):
    """Close's hold (``clean_leave._leave``): SIGTERM held too, its handler raising SystemExit (as
    a script's stop does) called once the stretch's work is done, and put back; a Ctrl-C
    inside too is raised after it, the SystemExit its context (both exempt from close's
    abort once the exchange is made)."""
    before = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        done: list[str] = []
        with pytest.raises(KeyboardInterrupt) as raised:
            with HeldInterrupt(), HeldInterrupt(signal.SIGTERM):
                os.kill(os.getpid(), signal.SIGTERM)
                ctrl_c_then_finish(done)
        assert done == ["recorded"]
        assert isinstance(raised.value.__context__, SystemExit), repr(raised.value.__context__)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(SystemExit):  # put back: raised where it comes
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
    finally:
        signal.signal(signal.SIGTERM, before)


class Raised(Exception):
    """What another signal's handler raises (as a SIGTERM's ``sys.exit`` or a timeout's)."""


def test_a_ctrl_c_after_another_handler_raised_during_a_stretch_is_handled(sigint):
    """Another signal's handler that raises as a stretch begins or ends (``signal`` runs the
    handlers pending before it swaps, and Python runs them as a call returns or a function
    begins) must not leave the noting handler in place: every later Ctrl-C would be noted by
    it and never raised. SIGPROF from an interval timer, at random points of the stretch."""
    held, armed = HeldInterrupt(), [False]

    def stretch() -> None:  # as the pump: the stretch's frame is left by the error
        with held:
            pass

    def other(signum: int, frame: object) -> None:
        if armed[0]:
            armed[0] = False
            raise Raised

    before = signal.signal(signal.SIGPROF, other)
    hits = lost = 0
    signal.setitimer(signal.ITIMER_PROF, 0.0002, 0.0002)
    try:
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            armed[0] = True
            try:
                while True:
                    stretch()
            except Raised:
                hits += 1
            try:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(3):
                    time.sleep(0)
                lost += 1
            except KeyboardInterrupt:
                pass
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, before)
    assert hits > 20, hits
    assert lost == 0, (lost, hits)


class FailingStart(SingleRankComm):
    """One rank whose collectives' starts get a Ctrl-C, then fail (a broken link)."""

    def Iallgather(self, send, recv, op=None):  # noqa: N802 - mpi4py's spelling
        ctrl_c_then_finish([])
        raise RuntimeError("the link to rank 1 is broken")

    Iallreduce = Iallgather  # noqa: N815


@pytest.mark.parametrize("start", ["check", "flags"])
def test_a_start_that_fails_with_a_ctrl_c_held_keeps_its_error_as_context(sigint, start):
    """A collective's start that raises its own error while a Ctrl-C is held: the interrupt
    (raised on leaving the stretch, as that error propagates) replaces it, the error its
    ``__context__``, so the real failure is still shown; nothing is kept for later (no
    request was stored: nothing started)."""
    check, used, kept = StepCheck(FailingStart()), UsedParams(FailingStart(), 1, None), []
    with pytest.raises(KeyboardInterrupt) as raised:
        check.post(0, {}, 0, 1) if start == "check" else used.post(None, kept)
    assert isinstance(raised.value.__context__, RuntimeError), repr(raised.value.__context__)
    assert check.kept is None and kept == [] and not check.pending
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class PutBackRaisesOnce:
    """``_signal`` whose second call of ``signal`` (a stretch's put-back) first runs another
    signal's pending handler, which raises (as ``signal`` does before it swaps), once."""

    def __init__(self) -> None:
        self.calls = 0
        self.getsignal = signal.getsignal

    def signal(self, signum: int, handler: object) -> object:
        self.calls += 1
        if self.calls == 2:
            raise Raised("another signal's handler")
        return signal.signal(signum, handler)


@pytest.mark.parametrize("handler", ["default", "stop_request"])
def test_a_ctrl_c_inside_is_handed_on_when_another_handler_raises_at_the_put_back(
    sigint, monkeypatch, handler
):
    """Another handler's error raised as the stretch puts SIGINT's handler back is raised, but
    the Ctrl-C that came inside still reaches its handler: Python's raises KeyboardInterrupt,
    that error its context; ``stop_request``'s notes the stop request. Before, the error was
    raised alone and the Ctrl-C dropped (the user's stop request lost)."""
    stop = StopRequest(announce=False)
    restore = stop.install() if handler == "stop_request" else lambda: None
    monkeypatch.setattr(held, "_sig", PutBackRaisesOnce())
    try:
        with pytest.raises((Raised, KeyboardInterrupt)) as raised:
            with HeldInterrupt():
                ctrl_c_then_finish([])
        if handler == "default":
            assert isinstance(raised.value, KeyboardInterrupt), repr(raised.value)
            assert isinstance(raised.value.__context__, Raised)
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        else:
            assert isinstance(raised.value, Raised) and stop.received == {signal.SIGINT}
    finally:
        restore()


def test_one_rank_with_the_thread_raises_a_ctrl_c_as_the_flags_start_is_queued(sigint, monkeypatch):
    """One rank, the communication thread: a Ctrl-C as ``finish_step`` queues the flags'
    start to the thread is kept (the step's collectives first), then raised, no parameter
    updated. Before, the one-rank path (each bucket updated once reduced) never looked at
    what was kept: the step finished and the Ctrl-C was dropped."""
    sync, params = bucket_sync(comm=SingleRankComm(), overlap=True), bucket_params()
    try:
        sync.setup(params, {})
        assert sync._thread is not None
        before = [p.value.copy() for p in params]
        monkeypatch.setattr(CommThread, "call", interrupted_after(CommThread.call))
        sync.start_step(1)
        fire(sync, params[0], 1.0)
        with pytest.raises(KeyboardInterrupt):
            sync.finish_step()
        assert all((p.value == b).all() for p, b in zip(params, before))
    finally:
        sync.close()
