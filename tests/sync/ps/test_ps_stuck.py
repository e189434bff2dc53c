"""Ranks held on shard 0 at points of the job that can never meet are named at once, not after
the shard's timeout: real shards, real workers (threads of this process) on 127.0.0.1."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest
import zmq
from hand_shard import BLOCKS, ROWS
from ps_helpers import batches, insecure_worker, run_ranks, served, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.handlers import STALE_PUSH
from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.refusals import START_ENDED
from distconv.sync.ps.server import Shard
from distconv.sync.ps.state import _Waiting
from distconv.sync.ps.stuck import held_now, stuck
from distconv.sync.ps.wire import pack, unpack_header

#: far over what any test here takes: a job that waits for it hangs the test (run_ranks)
TIMEOUT = 120
MISMATCH = "ranks are at different points of the job"


def _workers(endpoints, data, steps: int, then, wait=(0.0, 0.0), timeout: float = TIMEOUT):
    """Two workers on ``endpoints``: rank r sleeps ``wait[r]`` s, sets up, trains ``steps``
    steps of ``data``, then runs ``then[r](sync, net, the rest of data)`` and closes. Returns
    per rank the message of the SyncError it raised, or None."""

    def rank_fn(rank):
        time.sleep(wait[rank])
        net, sync = small_net(), insecure_worker(endpoints, rank, 2, timeout=timeout)
        try:
            sync.setup(net.parameters(), {"batch": 8})
            train_steps(net, sync, data[:steps], rank, 2)
            then[rank](sync, net, data[steps:])
        except SyncError as exc:
            return str(exc)
        finally:
            sync.close()
        return None

    return run_ranks(rank_fn, 2, timeout=30)


def _job(shards, rank_next, steps: int = 2):
    """Two workers train ``steps`` steps on fresh shards, then rank r runs
    ``rank_next[r](sync, net, data)``; see :func:`_workers`."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    return _workers(endpoints, batches(steps + 1, 8), steps, rank_next)


def _sums(sync, net, data):
    sync.allreduce_sum([1.0, 2.0])


def _barrier(sync, net, data):
    sync.barrier()


def _step(sync, net, data):
    rank = sync.rank
    train_steps(net, sync, data, rank, 2)


def _close(sync, net, data):
    pass  # the caller's finally: bye


def _late_barrier(sync, net, data):
    time.sleep(0.5)  # rank 0 waits in its barrier meanwhile: a wait that will be answered
    sync.barrier()


def _doing(message: str, rank: int) -> str:
    """What ``message`` says rank ``rank`` was doing."""
    found = re.search(rf"rank {rank} \(host [^)]*\): (.*?)(?=; rank \d|\): )", message)
    assert found, message
    return found.group(1)


@pytest.mark.timeout(60)
def test_a_metrics_sum_and_a_barrier_are_named_at_once(shards):
    messages = _job(shards, [_sums, _barrier])
    for m in messages:  # both ranks stop, each with the shard's message
        assert m is not None and MISMATCH in m, messages
        assert "each rank waits in a collective another rank never makes" in m
    assert re.fullmatch(r"summing metrics \(allreduce:\d+\)", _doing(messages[0], 0))
    assert re.fullmatch(r"at a barrier \(barrier:\d+\)", _doing(messages[0], 1))
    assert "last step 2" in messages[0]  # steps numbered from 1: two done


@pytest.mark.timeout(60)
def test_a_metrics_sum_while_the_other_rank_steps_is_named_at_once(shards):
    messages = _job(shards, [_sums, _step])
    for m in messages:
        assert m is not None and "another is in a step, which needs its push" in m, messages
    assert _doing(messages[0], 1) == "pushed step 3, waiting for the others' pushes"


@pytest.mark.timeout(60)
def test_a_barrier_after_the_other_rank_closed_is_named_at_once(shards):
    messages = _job(shards, [_barrier, _close])
    assert messages[1] is None  # its bye is answered as usual
    assert messages[0] is not None and "a rank closed (bye) while another waits" in messages[0]
    assert _doing(messages[0], 1) == "closed"


@pytest.mark.timeout(60)
def test_a_rank_late_to_the_same_gather_is_waited_for(shards):
    assert _job(shards, [_barrier, _late_barrier]) == [None, None]


@pytest.mark.timeout(90)
def test_workers_restarted_against_running_shards_start_again(shards):
    """Both workers stop cleanly (a bye each) and restart, rank 1 half a second after rank 0,
    against shards that kept running (Kubernetes restarts worker containers, not the shards'
    StatefulSet): rank 1's bye belongs to its earlier run, and rank 0's start-up gather waits."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    data = batches(2, 8)
    for delay in (0.0, 0.5):
        assert _workers(endpoints, data, 2, [_barrier] * 2, wait=(0.0, delay)) == [None, None]


@pytest.mark.timeout(90)
@pytest.mark.parametrize("late", [0, 1])
def test_a_push_left_held_by_a_killed_run_does_not_fail_the_next(shards, late):
    """Rank 1 dies after two steps (no bye) while rank 0's step-3 push waits for it; rank 0
    gives up at its own timeout and both restart within the shard's, rank ``late`` half a
    second after the other: rank 0's old push, held until its new seed lands, is from the run
    before, even while rank 1's new run waits in a gather before rank 0 has said hello."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    data = batches(3, 8)
    dead = []  # rank 1's sync, held: one dropped would say bye when collected, a killed one not

    def first(rank):
        net, sync = small_net(), insecure_worker(endpoints, rank, 2, timeout=1)
        sync.setup(net.parameters(), {"batch": 8})
        train_steps(net, sync, data[:2], rank, 2)
        if rank == 1:
            dead.append(sync)
            return None  # dies here: no bye, no step 3
        try:
            train_steps(net, sync, data[2:], rank, 2)
        except SyncError as exc:
            return str(exc)
        finally:
            sync.close()
        return None

    gave_up, _ = run_ranks(first, 2, timeout=30)
    assert gave_up is not None and "step 3" in gave_up and MISMATCH not in gave_up

    wait = tuple(0.5 * (rank == late) for rank in (0, 1))
    assert _workers(endpoints, data[:2], 2, [_barrier] * 2, wait=wait) == [None, None]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("held", ["barrier", "push"])
def test_a_process_of_the_run_before_stops_at_once_when_the_job_restarts(shards, held):
    """Rank 0 dies after two steps, while rank 1 waits in a barrier (or its step-3 push is
    held); both restart against the running shards while the old rank 1 still waits. The
    first hello of the new run (rank 0's, whose worker said no bye, or rank 1's) drops what it
    waits for, and it stops at once, naming why, instead of at its timeout (1.5 x 120 s here);
    the new run trains, whichever of its ranks says hello first (the old barrier is not of rank
    0's new run)."""
    endpoints = shards.start(1, workers=2, extra=["--timeout", str(TIMEOUT)])
    data = batches(3, 8)
    old: dict = {}
    stopped: list = []
    held_next = threading.Event()

    def first_run(rank):
        net, sync = small_net(), insecure_worker(endpoints, rank, 2, timeout=TIMEOUT)
        old[rank] = sync
        sync.setup(net.parameters(), {"batch": 8})
        train_steps(net, sync, data[:2], rank, 2)
        if rank == 0:
            return  # dies: no step 3, no bye (closed at the end of the test, unheard)
        held_next.set()
        try:
            sync.barrier() if held == "barrier" else train_steps(net, sync, data[2:], rank, 2)
        except SyncError as exc:
            stopped.append((time.monotonic(), str(exc)))

    old_ranks = [threading.Thread(target=first_run, args=(r,), daemon=True) for r in (0, 1)]
    try:
        for t in old_ranks:
            t.start()
        assert held_next.wait(30)
        time.sleep(0.5)  # rank 1's request has reached the shard (else its process would
        # look like the new run's rank 1 in another gather than rank 0: the job fails)
        assert not stopped
        restart = time.monotonic()
        assert _workers(endpoints, data, 2, [_close] * 2) == [None, None]
        old_ranks[1].join(10)
        assert not old_ranks[1].is_alive(), "the old rank 1 still waits"
    finally:  # a bye of the run before: ignored (a socket is closed by its own thread only)
        for rank, sync in old.items():
            if not old_ranks[rank].is_alive():
                sync.close()
    ((when, message),) = stopped
    assert re.search(r"rank [01] started again \(a newer worker said hello", message), message
    assert f"this worker's {'step 3' if held == 'push' else 'barrier:3'} is dropped" in message
    assert when - restart < 10


# -- the order of arrival, pinned: a shard handed its requests one by one ----------------------
def _push_w(h, rank: int, step: int) -> None:
    """Rank ``rank``'s sync push of step ``step`` for the seeded ``w`` (held: 2 workers)."""
    head = {"op": "push", "rank": rank, "step": step, "count": 1, "lr": 0.1, "params": [0]}
    head |= {"blocks": list(range(BLOCKS)), "versions": [0] * BLOCKS}
    h.send(head, [np.zeros((ROWS, 1))] * BLOCKS)


def _gather(h, rank: int, tag: str) -> None:
    h.send({"op": "gather", "rank": rank, "tag": tag, "value": None})


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "first, then, why",
    [
        (lambda h: _push_w(h, 1, 3), lambda h: _gather(h, 0, "barrier:5"), "needs its push"),
        (lambda h: _gather(h, 0, "barrier:5"), lambda h: _push_w(h, 1, 3), "needs its push"),
        (lambda h: h.send({"op": "bye", "rank": 1}), lambda h: _gather(h, 0, "barrier:5"), "bye"),
        (lambda h: _gather(h, 0, "barrier:5"), lambda h: h.send({"op": "bye", "rank": 1}), "bye"),
        (lambda h: _gather(h, 0, "barrier:5"), lambda h: _gather(h, 1, "allreduce:5"), "never"),
    ],
)
def test_either_order_of_arrival_fails_the_job_at_the_second(hand, first, then, why):
    h = hand(workers=2)
    h.seed()
    first(h)
    assert not h.shard.failed  # the first alone may still be answered
    then(h)
    assert h.shard.failed and why in h.shard.failed
    replies = [h.read()[0] for _ in range(2)]
    assert not h.client.poll(200)  # one reply each, no more
    errors = [r.get("error") for r in replies if r["op"] == "error"]
    # each held request gets the failure; a bye is answered as usual
    assert errors == [h.shard.failed] * (2 - (why == "bye"))
    assert not h.shard.gathers_held and not h.shard.waiting


def _hello(h, rank: int) -> None:
    assert h.ask({"op": "hello", "rank": rank, "host": "h", **hello_fields({})})[0]["op"] == "ok"


def _bye(h, rank: int, **head) -> None:
    assert h.ask({"op": "bye", "rank": rank, **head})[0]["op"] == "ok"


def _meet(h, ranks: Sequence[int] = (0, 1)) -> None:
    """``ranks`` (0 and 1) meet in the start-up gather, which is answered."""
    for rank in ranks:
        _gather(h, rank, "all_equal:1")
    assert [h.read()[0]["op"] for _ in ranks] == ["ok"] * len(ranks)


@pytest.mark.timeout(30)
def test_what_a_rank_said_before_its_latest_hello_is_not_held_against_it(hand):
    """Every worker says bye, and rank 0's restarted run waits in its start-up gather before
    rank 1's has said hello: rank 1's bye is from the run before (the job before ended, so
    the shard starts afresh, and the new run's rank 0 seeds it). Then a push held from a run
    that died: ignored once its rank has said hello again."""
    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    h.seed()
    for rank in (0, 1):
        _bye(h, rank)
    _hello(h, 0)
    _gather(h, 0, "all_equal:1")
    assert not h.shard.failed
    _hello(h, 1)
    _gather(h, 1, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]
    assert h.seed() == []  # the new run's rank 0 seeds at its setup
    _push_w(h, 0, 3)  # held for rank 1, which dies; both restart
    _hello(h, 0)
    _hello(h, 1)
    _gather(h, 1, "barrier:2")  # rank 1 waits at setup's barrier while rank 0 seeds
    assert not h.shard.failed, h.shard.failed
    _gather(h, 0, "barrier:2")  # (a real rank 0 seeds before it: the rule does not look)
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]
    assert not h.shard.failed


@pytest.mark.timeout(30)
def test_a_gather_every_rank_sent_is_answered_and_no_longer_held(hand):
    h = hand(workers=2)
    _gather(h, 0, "barrier:5")
    assert h.shard.gathers_held == {"gather:barrier:5"}
    _gather(h, 1, "barrier:5")
    assert [h.read()[0]["values"] for _ in range(2)] == [[None, None]] * 2
    assert not h.shard.gathers_held and not h.shard.waiting and not h.shard.failed


@pytest.mark.timeout(30)
@pytest.mark.parametrize("said_bye", [True, False])
def test_a_push_of_the_run_before_counts_for_nothing_before_its_rank_says_hello(hand, said_bye):
    """Rank 1's step-3 push is held when rank 0 dies; rank 1 gives up (a bye) or is killed.
    Both restart, rank 0 first: its start-up gather comes before rank 1's hello, and neither
    rank 1's push nor its bye is of rank 0's run."""
    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    h.seed()
    _push_w(h, 1, 3)
    if said_bye:
        _bye(h, 1)
    _hello(h, 0)
    _gather(h, 0, "all_equal:1")
    assert not h.shard.failed, h.shard.failed
    _hello(h, 1)
    _gather(h, 1, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok", "ok"]


@pytest.mark.timeout(30)
def test_a_bye_of_a_process_of_the_run_before_is_left_to_the_timeout(hand):
    """Rank 0 crashes and restarts at once; rank 1's process of the run before gives up a
    little later, saying bye while rank 0's new run waits in its start-up gather. Nothing tells
    that bye from one of rank 0's run but that the ranks have not met since rank 0's hello, and
    rank 1 has said none: it is not counted (rank 1's restart will come to the gather)."""
    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    _hello(h, 0)
    _gather(h, 0, "all_equal:1")
    _bye(h, 1)
    assert not h.shard.failed, h.shard.failed
    _hello(h, 1)
    _gather(h, 1, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok"] * 2
    # in the same run, once the ranks have met, a bye counts: rank 0 at a barrier is named
    _bye(h, 1)
    _gather(h, 0, "barrier:2")
    assert h.shard.failed and "closed (bye)" in h.shard.failed


@pytest.mark.timeout(30)
def test_a_bye_counts_once_the_ranks_have_met_whoever_said_hello_first(hand):
    """Rank 1 says hello before rank 0; the two meet at the start-up gather, then rank 1
    closes while rank 0 waits at a barrier: its bye is of this run, though its hello came
    before rank 0's."""
    h = hand(workers=2)
    for rank in (1, 0):
        _hello(h, rank)
    _meet(h)
    _bye(h, 1)
    _gather(h, 0, "barrier:2")
    assert h.shard.failed and "closed (bye)" in h.shard.failed


@pytest.mark.timeout(30)
def test_a_rank_refused_at_hello_that_closes_is_named_at_once(hand):
    """Rank 1 runs another job: its hello is refused and it closes, while rank 0 waits in the
    start-up gather. Its bye comes after its hello, which came after rank 0's: of this run."""
    h = hand(workers=2)
    _hello(h, 0)
    _gather(h, 0, "all_equal:1")
    other = {"op": "hello", "rank": 1, "host": "h", **hello_fields({"batch": 8})}
    assert "run different jobs" in h.ask(other)[0]["error"]
    _bye(h, 1)
    said = h.read()[0]["error"]  # rank 0's gather: this start ended, the shard serves the next
    assert said.startswith("rank 1 and rank 0 run different jobs: ") and said.endswith(
        f"; {START_ENDED}"
    ), said
    assert not h.shard.failed and h.shard.job is None


@pytest.mark.timeout(30)
def test_a_refused_hello_hides_nothing_the_rank_holds(hand):
    """A stray hello with rank 1's number but another job's description is refused; rank 1's
    held push is still its own: rank 0 waiting in a gather beside it is named at once."""
    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    h.seed()
    _push_w(h, 1, 3)
    stray = {"op": "hello", "rank": 1, "host": "stray", **hello_fields({"batch": 8})}
    assert "run different jobs" in h.ask(stray)[0]["error"]
    _gather(h, 0, "allreduce:5")
    assert h.shard.failed and "needs its push" in h.shard.failed


@pytest.mark.timeout(30)
def test_a_bye_counts_whatever_connection_it_comes_on(hand):
    """ZeroMQ gives a client that reconnects a new routing id: its bye, on the new connection,
    is its rank's (rank 0 at a barrier is named at once)."""
    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    _meet(h)
    again = h.ctx.socket(zmq.DEALER)
    again.linger = 0
    try:
        again.connect(f"tcp://{h.shard.endpoint}")
        again.send_multipart(pack({"id": 1, "job": "local", "rank": 1, "op": "bye"}, []))
        h.shard.handle(h.shard._sock.recv_multipart(copy=False))
        assert again.poll(5000)  # the reply, on the new connection
        assert unpack_header(again.recv_multipart()[0], request=False)["op"] == "ok"
    finally:
        again.close()
    _gather(h, 0, "barrier:2")
    assert h.shard.failed and "closed (bye)" in h.shard.failed


def _hello_run(h, rank: int, run: int, job: dict | None = None) -> dict:
    """Rank ``rank``'s hello with run id ``run`` (of ``job``, {} by default); the reply's header."""
    head = {"op": "hello", "rank": rank, "host": "h", **hello_fields(job or {}), "run": run}
    return h.ask(head)[0]


def _refused_restart(h) -> None:
    """Rank 1 ran as run 11; rank 0 (run 5) waits in its start-up gather; rank 1's restart,
    run 33, runs another job and is refused."""
    for rank, run in ((1, 11), (0, 5)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    assert "another job" in _hello_run(h, 1, 33, {"batch": 8})["error"]


@pytest.mark.timeout(30)
def test_a_bye_of_another_run_than_its_ranks_latest_hello_is_ignored(hand):
    """Rank 1's pod is evicted and its replacement says hello (run 22) while the old process
    (run 11) still runs: the old one's bye is answered and ignored, the new one's counts."""
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11), (1, 22)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _bye(h, 1, run=11)
    assert 1 not in h.shard.left
    _bye(h, 1, run=22)
    assert 1 in h.shard.left


@pytest.mark.timeout(30)
def test_the_bye_of_a_restart_refused_at_hello_counts(hand):
    """Run 33, refused, closes while rank 0 waits in the start-up gather: that bye is the
    restart's, named at once (nothing seeded: this start ends, failing no shard)."""
    h = hand(workers=2)
    _refused_restart(h)
    _bye(h, 1, run=33)
    said = h.read()[0]["error"]  # rank 0's gather
    assert said.startswith("rank 1 runs another job") and said.endswith(START_ENDED), said
    assert not h.shard.failed and h.shard.job is None


@pytest.mark.timeout(30)
def test_a_refused_run_s_bye_after_an_accepted_restart_is_ignored(hand):
    """After run 33 is refused, rank 1's run 44 is accepted: run 33's late bye is not the
    rank's (rank 0, waiting in its start-up gather, goes on waiting)."""
    h = hand(workers=2)
    _refused_restart(h)
    assert _hello_run(h, 1, 44)["op"] == "ok"
    _bye(h, 1, run=33)
    assert 1 not in h.shard.left and not h.shard.failed


def _serving_shard() -> contextlib.AbstractContextManager[Shard]:
    """A one-worker shard served on a thread of this process (its state readable here)."""
    return served(Shard(ShardConfig(bind="127.0.0.1:0", workers=1, insecure=True, timeout=TIMEOUT)))


@pytest.mark.timeout(60)
def test_a_worker_says_one_run_id_in_its_hello_and_its_bye():
    """Real workers on a shard serving in a thread: each run of a rank has its own run id; the
    shard keeps the latest hello's, and the bye of that run counts."""
    with _serving_shard() as shard:
        runs = []
        for _ in range(2):  # a run of rank 0, then its restart
            net, sync = small_net(), insecure_worker([shard.endpoint], 0, 1)
            try:
                sync.setup(net.parameters(), {"batch": 8})
                runs.append(shard.run_of[0])
            finally:
                sync.close()
            deadline = time.monotonic() + 10
            while 0 not in shard.left:  # the bye is handled on the shard's thread
                assert time.monotonic() < deadline, "no bye"
                time.sleep(0.01)
        assert len(set(runs)) == 2 and None not in runs


@pytest.mark.timeout(60)
def test_a_process_of_the_run_before_is_refused_once_its_rank_started_again():
    """Every request carries its worker's run id: once a new worker of rank 0 has said hello,
    the old one's requests are refused, naming why, instead of joining the new run."""
    with _serving_shard() as shard:
        old, new = (insecure_worker([shard.endpoint], 0, 1) for _ in range(2))
        try:
            old.setup(small_net().parameters(), {"batch": 8})
            new.setup(small_net().parameters(), {"batch": 8})
            refused = r"rank 0 started again \(a newer worker said hello from host .*\): this "
            with pytest.raises(SyncError, match=refused + "worker's gather is of the run before"):
                old.barrier()
            new.barrier()  # the new run goes on
        finally:
            old.close()  # its bye is of the run before: ignored
            new.close()


@pytest.mark.timeout(60)
def test_a_second_setup_of_a_worker_keeps_its_run():
    """A real worker set up twice (a second fit) says hello again with the same run id: the
    shard takes it for the same run, and a second worker of the rank for a new one."""
    with _serving_shard() as shard:
        first, second = (insecure_worker([shard.endpoint], 0, 1) for _ in range(2))
        try:
            first.setup(small_net().parameters(), {"batch": 8})
            run, started = shard.run_of[0], shard.hello_at[0]
            first.setup(small_net().parameters(), {"batch": 8})
            assert (shard.run_of[0], shard.hello_at[0]) == (run, started)
            assert shard.accepted_at[0] > started
            second.setup(small_net().parameters(), {"batch": 8})
            assert shard.run_of[0] != run and shard.hello_at[0] > started
        finally:
            first.close()
            second.close()


@pytest.mark.timeout(30)
def test_a_refused_restart_s_bye_after_a_same_run_second_setup_is_ignored(hand):
    """Rank 1 (run 11) runs; a stray rank-1 worker (run 33, another job) is refused at hello;
    rank 1 sets up again (same run); the stray's bye comes last. Rank 1 has not left (the
    refused run once still counted, and the job failed naming rank 1 closed)."""
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    assert "run different jobs" in _hello_run(h, 1, 33, {"batch": 8})["error"]
    assert _hello_run(h, 1, 11)["op"] == "ok"
    _bye(h, 1, run=33)
    _gather(h, 0, "all_equal:2")
    assert 1 not in h.shard.left and not h.shard.failed


def _rank_0_restarted(hand):
    """Ranks 0 (run 5) and 1 (run 11) met; rank 0 restarted (run 6) and waits in its start-up
    gather, while the old rank 1 lives on. The hand-fed shard."""
    h = hand(workers=2)
    for rank, run in ((0, 5), (1, 11)):
        assert _hello_run(h, rank, run)["op"] == "ok"
    _meet(h)
    assert _hello_run(h, 0, 6)["op"] == "ok"
    _gather(h, 0, "all_equal:1")
    return h


@pytest.mark.timeout(30)
def test_a_bye_after_a_second_setup_of_a_worker_of_the_run_before_is_left_to_the_timeout(hand):
    """Rank 0 restarted and waits in its start-up gather; the old rank 1 sets up again (its
    own run) and closes. That bye is of the run before: rank 1's restart may still come, and
    does (the second setup's hello once counted as rank 1's new run, and the job
    failed naming rank 1 closed). A real second setup sends its start-up gather between the
    two, all_equal:1 as the new run's, which it meets (the job goes on with that worker); this
    order needs a setup that failed after its hello."""
    h = _rank_0_restarted(hand)
    assert _hello_run(h, 1, 11)["op"] == "ok"
    _bye(h, 1, run=11)
    assert not h.shard.failed, h.shard.failed
    assert _hello_run(h, 1, 12)["op"] == "ok"
    _gather(h, 1, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok"] * 2 and not h.shard.failed


@pytest.mark.timeout(30)
def test_a_refused_second_setup_of_a_worker_of_the_run_before_is_no_new_run(hand):
    """As above, but the old rank 1's second setup is refused (another description): a
    refused hello with the rank's own run is no new run either, so its bye is left to the
    timeout."""
    h = _rank_0_restarted(hand)
    assert "run different jobs" in _hello_run(h, 1, 11, {"batch": 8})["error"]
    _bye(h, 1, run=11)
    assert not h.shard.failed, h.shard.failed


_HELLO_2 = {"op": "hello", "rank": 2, "host": "new-pod", **hello_fields({}), "run": 22}


def _lose_rank_2(h) -> None:
    """Three ranks meet at start-up; rank 2 then goes silent and is declared lost."""
    for rank in (0, 1, 2):
        _hello(h, rank)
    for rank in (0, 1, 2):
        _gather(h, rank, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(3)] == ["ok"] * 3
    h.shard.last_seen[2] -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.lost == {2} and not h.shard.failed


@pytest.mark.timeout(30)
def test_a_lost_rank_cannot_join_again_and_fails_no_working_job(hand):
    """Async, --on-worker-loss continue: ranks 0 and 1 go on without rank 2, rank 1 finishes
    (bye), and rank 2's restart says hello. It is refused, naming why: a lost rank is left out
    of every later gather, so its start-up gather could never be answered (it once
    failed the job at once naming rank 1 closed, and later at the shard's timeout)."""
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=1.0)
    _lose_rank_2(h)
    for rank in (0, 1):
        _gather(h, rank, "barrier:2")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok"] * 2
    _bye(h, 1)
    refused = h.ask(_HELLO_2)[0]
    assert refused["op"] == "error" and refused["error"] == (
        "rank 2 was declared lost and the job goes on without it (--on-worker-loss continue): "
        "a worker of it cannot join again until the shards restart (from their checkpoint)"
    )
    assert not h.shard.waiting and not h.shard.failed


@pytest.mark.timeout(30)
def test_a_lost_rank_s_late_gather_is_refused_not_held_until_the_timeout(hand):
    """The lost rank's old worker was only slow: its gather would wait alone, and fail the
    working job at the shard's timeout naming the live ranks."""
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=1.0)
    _lose_rank_2(h)
    for rank in (0, 1):  # the live ranks met at barrier:2 without rank 2
        h.send({"op": "gather", "rank": rank, "tag": "barrier:2", "value": [rank]})
    assert [h.read()[0]["values"] for _ in range(2)] == [[[0], [1], None]] * 2
    h.send({"op": "gather", "rank": 2, "tag": "barrier:2", "value": None})
    assert h.client.poll(2000), "held, not refused"
    assert "rank 2 was declared lost" in h.read()[0]["error"]
    assert not h.shard.waiting and not h.shard.failed


@pytest.mark.timeout(30)
def test_every_rank_declared_lost_stops_the_job_saying_to_raise_the_timeout(hand):
    """Async, --on-worker-loss continue: rank 0 finished (bye), and every other rank paused
    past the timeout and was declared lost. Their next gathers are refused, naming the cause;
    before 73f7526 each was answered alone, with that rank's value only."""
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=1.0)
    for rank in (0, 1, 2):
        _hello(h, rank)
        h.shard.last_seen[rank] -= 10
    _bye(h, 0)
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.lost == {1, 2} and not h.shard.failed
    for rank in (1, 2):
        h.send({"op": "gather", "rank": rank, "tag": "allreduce:2", "value": [1.0]})
        assert h.client.poll(2000), "held, not refused"
        error = h.read()[0]["error"]
        assert error == (
            f"rank {rank} was declared lost, and so was every rank that has not closed: the "
            "job cannot go on (if they were only paused longer than --timeout, as in a long "
            "evaluation, raise it)"
        )
    assert not h.shard.waiting


@pytest.mark.timeout(30)
def test_only_shard_0_refuses_a_rank_it_declared_lost(hand):
    """Ranks waiting in a gather on shard 0 send nothing to the other shards, which may
    declare them lost: those decide nothing, and take the rank's next hello."""
    h = hand(workers=3, shard=1, num_shards=2, mode="async", on_worker_loss="continue")
    for rank in (0, 1, 2):
        _hello(h, rank)
    h.shard.last_seen[2] -= 1000
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.lost == {2}
    assert h.ask(_HELLO_2)[0]["op"] == "ok"


@pytest.mark.timeout(30)
def test_a_gather_of_a_second_process_of_a_rank_is_refused_not_answered(hand):
    """The job restarted; the old rank 1, alive beside its replacement, reaches barrier:3 after
    both new hellos. Refused: before, it was answered with the new rank 0's barrier:3 while the
    new rank 1 was elsewhere."""
    h = hand(workers=2)
    for rank, run in ((0, 1), (1, 2), (0, 3), (1, 4)):  # the old run, then the new
        assert _hello_run(h, rank, run)["op"] == "ok"
    h.send({"op": "gather", "rank": 1, "tag": "barrier:3", "value": None, "run": 2})
    assert h.client.poll(2000), "held, not refused"
    reply = h.read()[0]
    assert reply["op"] == "error" and "rank 1 started again" in reply["error"], reply
    assert "this worker's gather is of the run before, refused" in reply["error"]
    assert not h.shard.waiting and not h.shard.failed


@pytest.mark.timeout(30)
def test_a_second_setup_in_one_process_is_not_a_new_run(hand):
    """Rank 0 alone sums metrics between two fits; rank 1's second setup says hello again with
    the same run id, and its start-up gather is all_equal:1 (each setup numbers its gathers
    anew). The ranks can never meet: named at once (not left out as a gather of a
    run before)."""
    h = hand(workers=2)
    for rank in (0, 1):
        assert _hello_run(h, rank, 10 + rank)["op"] == "ok"
    _meet(h)
    _gather(h, 0, "allreduce:2")
    assert _hello_run(h, 1, 11)["op"] == "ok"
    _gather(h, 1, "all_equal:1")
    assert h.shard.failed and "each rank waits in a collective another" in h.shard.failed


@pytest.mark.timeout(30)
def test_a_lost_rank_that_comes_back_hides_no_mismatch_of_the_live_ranks(hand):
    """Async, --on-worker-loss continue: rank 2 is lost, and its restart's hello is refused
    while ranks 0 and 1 wait in gathers that can never meet: they are named (the
    returning rank's hello once hid them)."""
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=1.0)
    _lose_rank_2(h)
    _gather(h, 0, "barrier:5")
    assert "was declared lost" in h.ask(_HELLO_2)[0]["error"]
    _gather(h, 1, "allreduce:5")
    assert h.shard.failed and "each rank waits in a collective another" in h.shard.failed


@pytest.mark.timeout(30)
def test_a_gather_of_the_run_before_is_dropped_when_its_rank_says_hello(hand):
    """Rank 1 waits at setup's barrier when rank 0 dies seeding; both restart. Rank 1's old
    barrier:2 is dropped at its hello, so its new run's barrier:2 is not refused as sent twice;
    the old process, were it still alive, is told why at once (one error, then the hello's ok)."""
    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    _gather(h, 1, "barrier:2")
    h.send({"op": "hello", "rank": 1, "host": "new-pod", **hello_fields({})})
    dropped, hello = h.read()[0], h.read()[0]
    assert dropped["op"] == "error" and hello["op"] == "ok", (dropped, hello)
    assert dropped["error"] == (
        "rank 1 started again (a newer worker said hello from host new-pod): this worker's "
        "barrier:2 is of the run before, dropped"
    )
    assert dropped["id"] == h.next_id - 1  # the gather's id: its sender raises on it
    _hello(h, 0)
    assert not h.client.poll(200)  # nothing else was held for rank 1
    assert not h.shard.waiting and not h.shard.gathers_held
    _meet(h)
    _gather(h, 1, "barrier:2")
    assert not h.client.poll(200)  # held, not refused: rank 0 has not come yet
    _gather(h, 0, "barrier:2")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok"] * 2
    assert not h.shard.failed


@pytest.mark.timeout(30)
def test_a_push_held_when_rank_0_seeds_again_is_answered_with_why(hand):
    """Rank 1's step-3 push is held when rank 0 dies; both restart and rank 0 seeds again. The
    old push is dropped, and its process, were it still alive, is told why at once."""
    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    assert h.seed() == []
    _push_w(h, 1, 3)
    pushed = h.next_id
    for rank in (0, 1):
        _hello(h, rank)
    dropped = h.seed()
    assert [(r["op"], r["id"], r["error"]) for r in dropped] == [("error", pushed, STALE_PUSH)]
    assert not h.client.poll(200) and not h.shard.waiting and not h.shard.failed


@pytest.mark.timeout(30)
def test_a_new_run_s_first_gather_waits_beside_a_later_gather_of_the_run_before(hand):
    """Rank 0 died while rank 1 waits at barrier:3; rank 0's restart reaches its first gather
    before rank 1's restart says hello. Rank 1's barrier is of the run before (before, the job
    failed at once: "each rank waits in a collective another rank never makes"); rank 1's
    hello then drops it, and the new run meets."""
    h = hand(workers=2)
    for rank in (0, 1):
        _hello(h, rank)
    _meet(h)
    _gather(h, 1, "barrier:3")
    _hello(h, 0)
    _gather(h, 0, "all_equal:1")
    assert not h.shard.failed, h.shard.failed
    h.send({"op": "hello", "rank": 1, "host": "h", **hello_fields({})})
    assert [h.read()[0]["op"] for _ in range(2)] == ["error", "ok"]  # the old barrier, the hello
    _gather(h, 1, "all_equal:1")
    assert [h.read()[0]["op"] for _ in range(2)] == ["ok"] * 2
    assert not h.shard.failed and not h.shard.waiting


@pytest.mark.timeout(30)
def test_ranks_left_in_different_gathers_by_a_lost_worker_are_named(hand):
    """Async, --on-worker-loss continue: rank 2 goes silent while ranks 0 and 1 wait in
    different gathers. Once it is lost, nothing can come that answers them: named then."""
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=1.0)
    _gather(h, 0, "barrier:5")
    _gather(h, 1, "allreduce:6")
    h.send({"op": "beat", "rank": 2})  # its heartbeat
    h.read()
    assert not h.shard.failed  # rank 2 may still come
    h.shard.last_seen[2] -= 10  # silent past the timeout; ranks 0 and 1 were just seen
    h.shard._check_timeouts(time.monotonic())
    assert 2 in h.shard.lost
    assert h.shard.failed and "never makes" in h.shard.failed
    assert [h.read()[0]["error"] for _ in range(2)] == [h.shard.failed] * 2


# -- the rule itself, on what a shard holds ---------------------------------------------------
def _held(**by_key):
    """A shard's ``waiting``: key -> {rank: (header, arrived)}."""
    return {
        key: _Waiting(
            key,
            0.0,
            {r: (b"", header, None) for r, (header, _) in ranks.items()},
            {r: arrived for r, (_, arrived) in ranks.items()},
        )
        for key, ranks in by_key.items()
    }


def test_held_now_leaves_out_what_came_before_the_rank_said_hello_again():
    waiting = _held(
        **{"gather:barrier:4": {0: ({"tag": "barrier:4"}, 9), 1: ({"tag": "barrier:4"}, 3)}},
        **{"push:2": {1: ({"step": 7}, 5), 2: ({"step": 7}, 6)}},
    )
    assert held_now(waiting, {}) == ({0: "barrier:4", 1: "barrier:4"}, {1: 7, 2: 7}, -1)
    # rank 1 said hello at 8: its gather and its push are an earlier run's; rank 0's came after
    assert held_now(waiting, {0: 1, 1: 8}) == ({0: "barrier:4"}, {2: 7}, 1)
    # rank 0, in the gather, said hello at 6: rank 2's push came before it, in a run before
    assert held_now(waiting, {0: 6, 1: 8}) == ({0: "barrier:4"}, {}, 6)


def test_held_now_leaves_out_a_later_gather_from_before_a_gathering_ranks_hello():
    """Rank 0 said hello at 6 and waits in its run's first gather: rank 1's barrier:3, from
    before, cannot be of rank 0's run (rank 1 passed a first gather rank 0 never joined), where
    rank 2's all_equal:1 may be (it may have said hello, and started, before rank 0 did)."""
    waiting = _held(
        **{"gather:all_equal:1": {0: ({"tag": "all_equal:1"}, 7), 2: ({"tag": "all_equal:1"}, 4)}},
        **{"gather:barrier:3": {1: ({"tag": "barrier:3"}, 5)}},
    )
    gathers, _, since = held_now(waiting, {0: 6, 1: 1, 2: 2})
    assert gathers == {0: "all_equal:1", 2: "all_equal:1"} and since == 6
    # rank 1's hello came after rank 0's: its barrier is its own run's, as before
    assert held_now(waiting, {0: 1, 1: 2, 2: 3})[0] == {
        0: "all_equal:1",
        1: "barrier:3",
        2: "all_equal:1",
    }


@pytest.mark.parametrize(
    "gathers, pushes, gone, why",
    [
        ({0: "allreduce:5", 1: "barrier:5"}, {}, (), "never makes"),
        ({0: "allreduce:5", 1: "allreduce:6"}, {}, (), "never makes"),
        ({0: "barrier:4"}, {1: 7}, (), "needs its push"),
        ({0: "barrier:4"}, {}, (1,), "closed (bye)"),
    ],
)
def test_what_can_never_be_answered_is_named(gathers, pushes, gone, why):
    message = stuck(gathers, pushes, live=[0, 1], gone=gone)
    assert message is not None and why in message and message.startswith(MISMATCH)


@pytest.mark.parametrize(
    "gathers, pushes, live, gone",
    [
        ({}, {}, [0, 1], ()),  # nothing held
        ({}, {0: 7}, [0, 1], (1,)),  # a step waiting for a rank that left: the timeout's
        ({0: "barrier:4"}, {}, [0, 1], ()),  # rank 1 may still come
        ({0: "barrier:4", 1: "barrier:4"}, {}, [0, 1, 2], ()),  # so may rank 2
        # a push of the gathering rank itself (a step it gave up): no other rank is in a step
        ({0: "barrier:4"}, {0: 7}, [0, 1], ()),
        # every live rank in the same gather: the shard answers it (async: rank 1 lost)
        ({0: "barrier:4"}, {}, [0], ()),
    ],
)
def test_what_may_still_be_answered_is_left_waiting(gathers, pushes, live, gone):
    assert stuck(gathers, pushes, live=live, gone=gone) is None
