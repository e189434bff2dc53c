"""A worker that closes in the middle of a sync job (an exception, or fewer steps) ends it at
once, named with its error, instead of leaving the others to wait for its push until the
timeout: real shards, real workers (threads of this process) on 127.0.0.1."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.arg import Arg
from distconv.sync.base import SyncError

#: far over what any test here takes: without the rule, rank 0 would wait this long
TIMEOUT = 120
STEPS = 6


class Boom(RuntimeError):
    pass


@contextlib.contextmanager
def _worker(endpoints, rank: int, push_bytes: int | None = None):
    """Rank ``rank`` of two (the small net and its ``PServerSync``), set up; closed on the way
    out, in a ``finally`` as ``distconv.job`` closes, so an error propagating goes along with
    its ``bye``."""
    net, sync = small_net(), insecure_worker(endpoints, rank, 2, timeout=TIMEOUT)
    if push_bytes is not None:
        sync.push_bytes = push_bytes
    try:
        sync.setup(net.parameters(), {"batch": 8})
        yield net, sync
    finally:
        sync.close()


def _job(endpoints, stops_after: int, raises: bool, order: str | None = None):
    """Rank 1 trains ``stops_after`` steps, then raises :class:`Boom` (``raises``) or just
    closes; rank 0 trains ``STEPS``. ``order`` puts rank 1's bye before rank 0's next push
    (``"bye first"``) or after it (``"push first"``, as far as a short wait can). Returns per
    rank what it raised (its message), or None."""
    data = batches(STEPS, 8)
    bye_sent, pushing = threading.Event(), threading.Event()

    def rank_1():
        try:
            with _worker(endpoints, 1) as (net, sync):
                train_steps(net, sync, data[:stops_after], 1, 2)
                if order == "push first":
                    pushing.wait(10)
                    time.sleep(0.3)  # rank 0's push reaches the shard first
                if raises:
                    raise Boom("out of memory in layer fc1")
        finally:
            bye_sent.set()

    def rank_0():
        with _worker(endpoints, 0) as (net, sync):
            try:
                train_steps(net, sync, data[:stops_after], 0, 2)
                if order == "bye first":
                    bye_sent.wait(10)
                pushing.set()
                train_steps(net, sync, data[stops_after:], 0, 2)
            except SyncError as exc:
                return str(exc)

    results: list = [None, None]

    def run(rank):
        try:
            results[rank] = rank_0() if rank == 0 else rank_1()
        except Boom as exc:
            results[rank] = f"raised {exc}"

    run_ranks(run, 2, timeout=60)
    return results


@pytest.mark.timeout(60)
@pytest.mark.parametrize("num_shards", [1, 2])
@pytest.mark.parametrize("order", ["bye first", "push first"])
def test_a_worker_that_raised_mid_job_ends_it_at_once_naming_its_error(shards, num_shards, order):
    endpoints = shards.start(num_shards, workers=2, extra=["--timeout", str(TIMEOUT)])
    started = time.monotonic()
    rank0, rank1 = _job(endpoints, stops_after=3, raises=True, order=order)
    assert rank1 == "raised out of memory in layer fc1"
    assert rank0 is not None and time.monotonic() - started < TIMEOUT / 2, rank0
    assert "rank 1 (host" in rank0 and 'last step 3) closed on "Boom: out of memory in' in rank0
    assert "; rank 0 (step 4) waits for its push, and the step cannot complete without" in rank0
    assert "job failed" in shards.log_text()


@pytest.mark.timeout(60)
def test_a_worker_that_closed_after_fewer_steps_ends_it_at_once(shards):
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    rank0, rank1 = _job(endpoints, stops_after=2, raises=False, order="bye first")
    assert rank1 is None
    assert rank0 is not None and "last step 2) closed; rank 0 (step 3) waits" in rank0, rank0


@pytest.mark.timeout(60)
def test_in_async_mode_the_others_train_on_after_a_worker_raised(shards):
    """Nothing waits for a push in async mode: a worker gone is the timeout's business."""
    endpoints = shards.start(1, workers=2, mode="async", extra=["--timeout", str(TIMEOUT)])
    rank0, rank1 = _job(endpoints, stops_after=3, raises=True, order="bye first")
    assert rank1 == "raised out of memory in layer fc1" and rank0 is None
    assert "job failed" not in shards.log_text()


def _raises_in_backward(sync, net, batch, rank):
    """Hand the step's first gradient over and send it, then raise: a worker that ran out of
    memory half-way through backward, part of its step already at the shard. (It is sent
    outright: ``push_bytes`` 0 sends a gradient only while the shard's last push is known to
    have left, which under load it may not be yet; the bye then follows on the same socket.)"""
    x, y = batch
    sync.start_step(len(y[rank::2]))
    net.forward({"image": Arg(x[rank::2], needs_grad=False),
                 "label": Arg(ids=y[rank::2], needs_grad=False)})  # fmt: skip
    handed = []

    def first_only(param):
        if handed:
            raise Boom("out of memory in backward")
        sync.on_gradient(param)
        sync._flush_pushes()  # the outbox's own end-of-step send, for this one gradient
        handed.append(param.name)

    net.backward(first_only, loss="loss", loss_scale=len(y[rank::2]))


@pytest.mark.timeout(60)
def test_a_worker_that_raised_after_part_of_its_step_reached_a_shard_ends_the_job_at_once(shards):
    """The shard has rank 1's push of that step for one parameter: the check is per parameter."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    data = batches(4, 8)
    said = [None, None]

    def rank_fn(rank):
        with _worker(endpoints, rank, push_bytes=0) as (net, sync):  # rank 1's bye carries Boom
            try:
                train_steps(net, sync, data[: 4 if rank == 0 else 2], rank, 2)
                if rank == 1:
                    _raises_in_backward(sync, net, data[2], rank)
            except SyncError as exc:
                said[rank] = str(exc)

    def run(rank):
        try:
            rank_fn(rank)
        except Boom as exc:
            said[rank] = f"raised {exc}"

    run_ranks(run, 2, timeout=50)
    assert said[1] == "raised out of memory in backward"
    assert said[0] is not None and 'last step 3) closed on "Boom: out of memory' in said[0], said
    assert "; rank 0 (step 3) waits for its push" in said[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("push_bytes", [0, 64])
def test_healthy_jobs_and_whole_job_restarts_against_running_shards_do_not_fail(shards, push_bytes):
    """Three shards, a step in several messages, rank 1 always later (its bye last, then
    first); then new workers of both ranks against the same shards, rank 1 starting late."""
    endpoints = shards.start(3, workers=2, extra=["--timeout", str(TIMEOUT)])
    data = batches(5, 8)

    def job(restarted):
        def rank_fn(rank):
            if rank == 1 and restarted:
                time.sleep(0.5)
            with _worker(endpoints, rank, push_bytes) as (net, sync):
                for k in range(len(data)):
                    time.sleep(0.02 * rank)
                    train_steps(net, sync, data[k : k + 1], rank, 2)
                time.sleep(0.2 * (1 - rank) if restarted else 0)  # rank 1's bye first

        run_ranks(rank_fn, 2, timeout=60)

    for restarted in (False, True, True):
        job(restarted)
    assert "job failed" not in shards.log_text()


@pytest.mark.timeout(30)
def test_the_shard_cuts_the_error_a_bye_carries_to_one_short_line(hand):
    """Whoever sent it (another client, an older one): every later message quotes it."""
    from test_ps_stuck import _bye, _hello, _push_w

    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    h.seed()
    _bye(h, 1, error="Boom: line one\nline two " + "x" * 20000)
    _push_w(h, 0, 1)
    assert h.shard.failed and 'closed on "Boom: line one line two xx' in h.shard.failed
    assert "\n" not in h.shard.failed and len(h.shard.failed) < 600, len(h.shard.failed)


def test_the_error_a_worker_closes_on_is_one_short_line():
    from distconv.messages import described

    said = described(ValueError("a\nb " + "x" * 500))
    assert said.startswith("ValueError: a b xx") and len(said) == 300 and said.endswith("...")


ODD_ERROR = "Boom: out of memory (layer fc1); retry"


@pytest.mark.timeout(30)
def test_a_gather_after_a_bye_with_an_error_quotes_it_in_the_list_of_what_each_rank_does(hand):
    from test_ps_stuck import _bye, _gather, _hello, _meet

    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    _meet(h)  # the bye below is of this run of the workers
    _bye(h, 1, error=ODD_ERROR)
    _gather(h, 0, "barrier:2")
    assert f'rank 1 (host h, no step since its hello): closed on "{ODD_ERROR}"' in h.shard.failed


@pytest.mark.timeout(30)
def test_a_timeout_names_a_rank_that_closed_with_its_quoted_error(hand):
    """A bye before the ranks met is left to the timeout (it may be a worker of the run
    before); the timeout's message says how that rank left. Rank 1 closed on its own error in
    this start (after its hello, the ranks not met since): no late rank, the job fails."""
    from test_ps_stuck import _bye, _gather, _hello

    h = hand(workers=2, timeout=1.0)
    for rank in (1, 0):  # rank 1's hello before rank 0's: its bye may be of the run before
        _hello(h, rank)
    _bye(h, 1, error=ODD_ERROR)
    _gather(h, 0, "all_equal:1")
    assert not h.shard.failed
    h.shard._check_timeouts(time.monotonic() + 2.0)
    assert h.shard.failed.endswith(f'(rank 1 closed on "{ODD_ERROR}")'), h.shard.failed
    told = h.read()[0]  # the failure, not an answer that rank 1 is late (late_job_check.py)
    assert told["error"] == h.shard.failed and "late" not in told, told


@pytest.mark.timeout(30)
def test_ranks_left_waiting_for_a_push_are_named_in_one_sentence(hand):
    from test_ps_stuck import _bye, _hello, _push_w

    h = hand(workers=3)
    for rank in (0, 1, 2):
        _hello(h, rank)
    h.seed()
    _push_w(h, 0, 1)
    _push_w(h, 2, 1)
    _bye(h, 1)
    assert "closed; rank 0 (step 1), rank 2 (step 1) wait for its push" in h.shard.failed


@pytest.mark.timeout(60)
def test_closing_twice_is_as_closing_once(shards):
    """A script's own close() and the close in its finally: the second did send
    on closed sockets, a ZMQError that failed a finished job."""
    endpoints = shards.start(1, workers=1)
    sync = insecure_worker(endpoints)
    net = small_net()
    sync.setup(net.parameters(), {})
    train_steps(net, sync, batches(2, 4))
    sync.close()
    sync.close()
