"""A worker asked to stop (SIGTERM) while a sync shard cannot answer its step, because another
worker never pushes (killed): it gives up STOP_PATIENCE s later, naming the shard, the step
and the signal; without a stop it waits as before. A job whose steps were always that slow to
be answered (a slow peer) gets QUIET_FACTOR times its longest silence instead, and a metrics
sum or a barrier (a live rank may evaluate, or the chief write a checkpoint, meanwhile) is
never cut short."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable

import pytest
import zmq
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv import stop_request
from distconv.stop_request import StopRequest
from distconv.sync.base import SyncError
from distconv.sync.ps import channel

PATIENCE = 1.0


@pytest.fixture
def two_workers(shards, monkeypatch):
    """Ranks 0 and 1 set up against one sync shard; closed at the end."""
    monkeypatch.setattr(channel, "STOP_PATIENCE", PATIENCE)
    endpoints = shards.start(1, 2)
    nets = [small_net(), small_net()]
    syncs = [insecure_worker(endpoints, r, 2) for r in range(2)]
    run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
    yield nets, syncs
    for s in syncs:
        s.close()


class SigtermIn(threading.Thread):
    """A SIGTERM to this process ``seconds`` from now, then ``then()`` (a peer's late call)
    ``after`` seconds after the signal, in this one thread: a peer on a timer of its own ran
    early or late against the signal by as much as a loaded host holds a thread back, and the
    windows the tests check are counted from the signal (:attr:`sent`), not from its timer's
    start. Call :meth:`wait_sent` before the handlers go back: a signal after them (a test
    that failed early) would kill the whole pytest run; join it for ``then()``'s end."""

    def __init__(
        self, seconds: float, then: Callable[[], object] | None = None, after: float = 0.0
    ) -> None:
        super().__init__(daemon=True)
        self.seconds, self.then, self.after = seconds, then, after
        #: ``time.monotonic()`` as the signal was sent; None before
        self.sent: float | None = None
        self._sent = threading.Event()
        self.start()

    def wait_sent(self) -> None:
        """Return once the signal is sent (not waiting for ``then()``, which may wait on the
        very call that failed)."""
        self._sent.wait()

    def run(self) -> None:
        time.sleep(self.seconds)
        self.sent = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        self._sent.set()
        if self.then is not None:
            time.sleep(max(0.0, self.sent + self.after - time.monotonic()))
            self.then()


@pytest.mark.timeout(60)
def test_a_stop_ends_a_step_the_shard_cannot_answer(two_workers):
    (net, _), (sync, _) = two_workers
    restore = StopRequest(announce=False).install()
    try:
        sigterm = SigtermIn(0.3)
        with pytest.raises(SyncError) as raised:
            train_steps(net, sync, batches(1, 8), rank=0, world=2)
        took = time.monotonic() - sigterm.sent
    finally:
        sigterm.wait_sent()
        restore()
    assert PATIENCE - 0.1 < took < PATIENCE + 2, f"{took:.2f} s after the SIGTERM"
    message = str(raised.value)
    assert message.startswith("rank 0: asked to stop (SIGTERM), and pserver shard(s) 0 ")
    assert f"gave no answer to step 1 in the {PATIENCE:g} s since" in message


@pytest.mark.timeout(60)
def test_handshake_news_in_a_stop_s_wait_does_not_put_the_stop_off(two_workers, monkeypatch):
    """The handshake monitors share the wait's poller: news from one in every poll (a
    connection re-made again and again) is no answer from the shards, so the stop's patience
    still runs out (the helper alone was tested before, not the wait that uses it)."""
    (net, _), (sync, _) = two_workers
    poll = sync._poller.poll
    news = (sync._handshakes.monitor(0), zmq.POLLIN)
    monkeypatch.setattr(sync._poller, "poll", lambda ms=None: [*poll(ms), news])
    restore = StopRequest(announce=False).install()
    try:
        sigterm = SigtermIn(0.3)
        with pytest.raises(SyncError, match=r"asked to stop \(SIGTERM\)"):
            train_steps(net, sync, batches(1, 8), rank=0, world=2)
        took = time.monotonic() - sigterm.sent
    finally:
        sigterm.wait_sent()
        restore()
    assert took < PATIENCE + 2, f"{took:.2f} s after the SIGTERM"


def waited_past_the_stop(sync, seconds: float) -> threading.Event:
    """An event set once ``sync``'s step, with a stop pending, has waited ``seconds`` past the
    stop and goes on waiting (its stop's patience looked at, and not run out): a peer's late
    answer ordered by it comes while the wait runs, however late a loaded host ran the peer's
    thread, where a timer from the signal raced the patience (a thread held back 0.5 s failed
    a push half a patience late). The test sets it too once its own wait is over: a peer
    waiting on it is never left behind."""
    reached = threading.Event()
    patience_left = sync._stop_patience_left

    def looked_at(*args):
        left = patience_left(*args)  # raises once the patience ran out
        pending = stop_request.pending()
        if pending is not None and time.monotonic() - pending[1] >= seconds:
            reached.set()
        return left

    sync._stop_patience_left = looked_at
    return reached


def _answered_at(reached: threading.Event, call: Callable[[], object]) -> Callable[[], None]:
    """``call()`` once ``reached`` is set (the event of :func:`waited_past_the_stop`)."""

    def answer() -> None:
        reached.wait(timeout=60)
        call()

    return answer


@pytest.mark.timeout(60)
def test_a_step_answered_within_the_patience_ends_as_before(two_workers, monkeypatch):
    """Rank 1 pushes its step once rank 0 has waited half a patience past the stop; the
    patience is 5 PATIENCE here, far more than a loaded host holds a thread back."""
    monkeypatch.setattr(channel, "STOP_PATIENCE", 5 * PATIENCE)
    nets, syncs = two_workers
    data = batches(2, 8)
    half_way = waited_past_the_stop(syncs[0], PATIENCE / 2)
    restore = StopRequest(announce=False).install()
    try:
        push = functools.partial(train_steps, nets[1], syncs[1], data[:1], 1, 2)
        sigterm = SigtermIn(0.1, then=_answered_at(half_way, push))
        train_steps(nets[0], syncs[0], data[:1], rank=0, world=2)
    finally:
        half_way.set()
        sigterm.wait_sent()
        restore()
        sigterm.join()  # rank 1's push done
    # both took the same step: a second one goes through with no stop pending
    run_ranks(lambda r: train_steps(nets[r], syncs[r], data[1:], r, 2), 2)
    for p, q in zip(*(n.parameters() for n in nets)):
        assert (p.value == q.value).all()


def _with_the_peer_late(syncs, call: str, ours: tuple = (), theirs: tuple = ()):
    """A SIGTERM 0.1 s in, then rank 0's ``call(*ours)`` while rank 1 makes its
    ``call(*theirs)`` 2 x PATIENCE after the signal (a live rank that evaluates, or the chief
    writing a checkpoint); returns rank 0's answer and how long after the signal it came."""
    restore = StopRequest(announce=False).install()
    try:
        late = functools.partial(getattr(syncs[1], call), *theirs)
        sigterm = SigtermIn(0.1, then=late, after=2 * PATIENCE)
        answer = getattr(syncs[0], call)(*ours)
        waited = time.monotonic() - sigterm.sent
        sigterm.join()  # rank 1's call done
    finally:
        sigterm.wait_sent()
        restore()
    return answer, waited


@pytest.mark.timeout(60)
def test_a_barrier_is_not_cut_short_by_a_stop(two_workers):
    _, waited = _with_the_peer_late(two_workers[1], "barrier")
    assert waited >= 2 * PATIENCE, f"answered {waited:.2f} s after the SIGTERM"


@pytest.mark.timeout(60)
def test_a_metrics_sum_is_not_cut_short_by_a_stop(two_workers):
    answer, _ = _with_the_peer_late(two_workers[1], "allreduce_sum", ([1.0],), ([2.0],))
    assert answer == [3.0]


@pytest.mark.timeout(60)
def test_a_peer_always_that_slow_is_waited_for_as_long_as_it_always_was(two_workers):
    """Rank 1 pushes each step 2 PATIENCE late. After a stop, a step answered once rank 0 has
    waited 1.5 PATIENCE past it still ends as before: the patience is 3 x rank 0's usual
    silence (about 6 PATIENCE) here, not PATIENCE."""
    nets, syncs = two_workers
    data = batches(3, 8)
    past_patience = waited_past_the_stop(syncs[0], 1.5 * PATIENCE)

    def rank_1() -> None:
        for batch in data[:2]:
            time.sleep(2 * PATIENCE)  # rank 0's usual silence
            train_steps(nets[1], syncs[1], [batch], 1, 2)
        _answered_at(past_patience, lambda: train_steps(nets[1], syncs[1], data[2:], 1, 2))()

    slow = threading.Thread(target=rank_1)
    slow.start()
    try:
        train_steps(nets[0], syncs[0], data[:2], rank=0, world=2)
        restore = StopRequest(announce=False).install()
        try:
            sigterm = SigtermIn(0.1)
            train_steps(nets[0], syncs[0], data[2:], rank=0, world=2)
        finally:
            sigterm.wait_sent()
            restore()
    finally:
        past_patience.set()
        slow.join(timeout=60)
    assert not slow.is_alive()
    for p, q in zip(*(n.parameters() for n in nets)):
        assert (p.value == q.value).all()
