"""Async mode: which ranks a shard declares lost. A worker's heartbeat (``beat``, from a thread
of its own) keeps a busy rank alive; a killed worker process is lost; losing rank 0, the chief,
stops the job even with ``--on-worker-loss continue``; and only requests of a rank's current run
say that it lives (not a ``stats``, nor a worker of the run before)."""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import zmq
from ps_helpers import (
    batches,
    insecure_worker,
    raw_dealer,
    run_ranks,
    small_net,
    train_steps,
    worker_process,
)

from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.ps.beats import BEATS_PER_TIMEOUT, INTERVAL_BOUNDS, Heartbeat
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.job_hello import hello_fields
from distconv.sync.ps.late_job_check import NOT_FAILED
from distconv.sync.ps.losses import CHIEF_LOST
from distconv.sync.ps.wire import pack, unpack_header
from tests.child_env import child_path

pytestmark = pytest.mark.timeout(60)

ASYNC = {"workers": 2, "mode": "async"}
LONG = 600  # a --timeout no test waits out: what ends a wait must be something else


def _loss(policy: str, timeout: float = 1) -> list[str]:
    return ["--timeout", f"{timeout:g}", "--on-worker-loss", policy]


def _stats(sock: zmq.Socket) -> dict:
    """One shard's stats, asked on a raw socket."""
    sock.send_multipart(pack({"op": "stats", "id": 0, "job": "local", "rank": 0}))
    assert sock.poll(5000), "no stats"
    return unpack_header(sock.recv(), request=False)["stats"]


# -- on a shard fed by hand ---------------------------------------------------------------------
def _hello(h, rank: int, run: int) -> dict:
    return h.ask({"op": "hello", "rank": rank, "host": "h", **hello_fields({}), "run": run})[0]


def test_the_hello_reply_tells_the_worker_the_shard_s_timeout(hand):
    h = hand(workers=1, mode="async", timeout=7.5)
    assert _hello(h, 0, 1)["timeout"] == 7.5


def test_a_beat_of_the_rank_s_run_keeps_it_alive_and_one_of_the_run_before_is_refused(hand):
    """Rank 1 restarted (run 12) while its old worker (run 11) lives on: the old worker's beat
    is refused, naming why, and does not keep the rank alive; the new worker's does."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    for run in (11, 12):
        assert _hello(h, 1, run)["op"] == "ok"
    h.shard.last_seen[1] -= 10
    old = h.ask({"op": "beat", "rank": 1, "run": 11})[0]
    assert old["error"] == (
        "rank 1 started again (a newer worker said hello from host h): this worker's beat is "
        "of the run before, refused"
    )
    assert time.monotonic() - h.shard.last_seen[1] > 9
    assert h.ask({"op": "beat", "rank": 1, "run": 12})[0]["op"] == "ok"
    assert time.monotonic() - h.shard.last_seen[1] < 5
    h.shard._check_timeouts(time.monotonic())
    assert not h.shard.lost and not h.shard.failed


def test_a_stats_and_a_bye_of_the_run_before_say_nothing_of_a_rank_s_life(hand):
    """A monitoring tool's ``stats`` and the old worker's ``bye`` (answered, ignored) used to
    refresh the rank's last sign of life, so a dead rank was declared lost one timeout late,
    or never while the tool kept asking."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    assert _hello(h, 0, 5)["op"] == "ok"
    for run in (11, 12):
        assert _hello(h, 1, run)["op"] == "ok"
    h.shard.last_seen[1] -= 10
    assert h.ask({"op": "stats", "rank": 1})[0]["op"] == "ok"
    assert h.ask({"op": "bye", "rank": 1, "run": 11})[0]["op"] == "ok"
    assert h.ask({"op": "beat", "rank": 0, "run": 5})[0]["op"] == "ok"  # rank 0 lives
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.lost == {1} and not h.shard.failed


@pytest.mark.parametrize("shard", [0, 1])
def test_losing_rank_0_fails_the_job_even_with_continue(hand, shard):
    """Rank 0 writes the checkpoints and the metrics: the others must not train on without it.
    Every shard decides so (the heartbeat reaches them all, whatever rank 0 waits in)."""
    h = hand(workers=2, shard=shard, num_shards=2, mode="async", on_worker_loss="continue",
             timeout=1.0)  # fmt: skip
    for rank in (0, 1):
        assert _hello(h, rank, 7 + rank)["op"] == "ok"
    h.shard.last_seen[0] -= 10
    h.shard._check_timeouts(time.monotonic())
    assert (
        h.shard.failed == f"rank 0 (host h, no step since its hello) silent for 1 s: {CHIEF_LOST}"
    )
    assert h.ask({"op": "beat", "rank": 1, "run": 8})[0]["error"] == h.shard.failed


def _gather(h, rank: int, tag: str, value) -> None:
    h.send({"op": "gather", "rank": rank, "tag": tag, "value": value})


def test_with_continue_a_live_rank_a_gather_waits_for_too_long_is_left_out(hand):
    """Rank 1 lives (it beats) but stays away from a gather past the timeout (a hung main
    thread, a long evaluation): with ``continue`` it is lost, as a silent rank is, and the
    gather is answered without it, where it used to fail the job."""
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=1.0)
    for rank in (0, 1, 2):
        assert _hello(h, rank, rank)["op"] == "ok"
    for rank in (0, 2):
        _gather(h, rank, "barrier:2", [rank])
    assert h.ask({"op": "beat", "rank": 1, "run": 1})[0]["op"] == "ok"
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.lost == {1} and not h.shard.failed
    assert [h.read()[0]["values"] for _ in range(2)] == [[[0], None, [2]]] * 2


def test_with_continue_a_gather_that_waits_too_long_for_rank_0_fails_the_job(hand):
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    for rank in (0, 1):
        assert _hello(h, rank, rank)["op"] == "ok"
    _gather(h, 1, "barrier:2", None)
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.failed == (
        "rank 0 (host h, no step since its hello) sent nothing for barrier:2 "
        "(a meeting of every rank) within "
        f"1 s: {CHIEF_LOST}"
    )
    assert h.read()[0]["error"] == h.shard.failed


def test_with_continue_a_rank_late_to_start_is_waited_for_not_lost(hand):
    """A rank that never said hello (its pod still pulling its image) is no straggler: it is
    not lost for good, whose hello would then be refused at every retry; the start-up
    gather's timeout tells the rank waiting that it is late, failing nothing, and
    that worker says hello again (late_ranks.py)."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    assert _hello(h, 0, 5)["op"] == "ok"
    _gather(h, 0, "all_equal:1", "{}")
    h.shard.waiting["gather:all_equal:1"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert not h.shard.lost and h.shard.failed is None
    told = h.read()[0]
    assert told["error"] == (
        "rank 1 (which never said hello) sent nothing for all_equal:1 "
        f"(setup's job check) within 1 s; {NOT_FAILED}"
    )
    assert told["late"] == [1] and told["failed_ranks"] == [1], told


def test_with_continue_a_rank_whose_hello_came_after_the_gather_began_is_no_straggler(hand):
    """Rank 1 said hello (it lives) only after rank 0's start-up gather began, and has not
    gathered yet when the timeout comes: it is late to start, not staying away, so it is not
    lost for good: rank 0 is told it is late, and nothing fails."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    assert _hello(h, 0, 5)["op"] == "ok"
    _gather(h, 0, "all_equal:1", "{}")
    assert _hello(h, 1, 6)["op"] == "ok"
    h.shard.waiting["gather:all_equal:1"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert not h.shard.lost and h.shard.failed is None
    told = h.read()[0]
    assert "rank 1 (host h, no step since its hello) sent nothing" in told["error"], told
    assert told["late"] == [1], told


def test_a_dead_chief_that_a_gather_waits_for_is_named_silent(hand):
    """Silence is checked before the held gathers: rank 0, dead, is named silent, not taken
    for a live rank that stays away."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    for rank in (0, 1):
        assert _hello(h, rank, rank)["op"] == "ok"
    _gather(h, 1, "barrier:2", None)
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard.last_seen[0] -= 10
    h.shard._check_timeouts(time.monotonic())
    assert (
        h.shard.failed == f"rank 0 (host h, no step since its hello) silent for 1 s: {CHIEF_LOST}"
    )


def test_with_continue_ranks_held_in_other_gathers_are_not_taken_for_stragglers(hand):
    """Rank 0 waits in barrier:5, rank 1 in allreduce:6, rank 2 lives but comes to neither:
    rank 1 did not stay away from barrier:5, it waits elsewhere; the job fails naming both
    as before, not with rank 0 taken for a lost chief."""
    h = hand(workers=3, mode="async", on_worker_loss="continue", timeout=1.0)
    for rank in (0, 1, 2):
        assert _hello(h, rank, rank)["op"] == "ok"
    _gather(h, 0, "barrier:5", None)
    _gather(h, 1, "allreduce:6", None)
    for key in list(h.shard.waiting):
        h.shard.waiting[key].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert not h.shard.lost
    assert h.shard.failed == (
        "rank 1 (host h, no step since its hello), rank 2 (host h, no step since its "
        "hello) sent nothing for "
        "barrier:5 (a meeting of every rank) within 1 s (rank 1 waits in allreduce:6)"
    )


# -- real shards, real workers -------------------------------------------------------------------
@pytest.mark.timeout(90)
@pytest.mark.parametrize("curve", [False, True])
def test_a_worker_busy_for_longer_than_the_timeout_is_not_declared_lost(shards, job_keys, curve):
    """Rank 1 sends nothing for 3 s (a long evaluation) while the shards' timeout is 1 s and
    any loss fails the job: its heartbeat keeps it in, CURVE on or off. Before, the job failed
    naming it."""
    endpoints = shards.start(2, **ASYNC, keys=job_keys if curve else None, extra=_loss("fail"))
    if curve:
        syncs = [PServerSync(create_optimizer("sgd", lr=0.05), rank=rank, world_size=2,
                             pservers=endpoints, keys_dir=job_keys, timeout=20, block_bytes=64)
                 for rank in (0, 1)]  # fmt: skip
    else:
        syncs = [insecure_worker(endpoints, rank, 2) for rank in (0, 1)]
    nets = [small_net(), small_net(1)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters(), {"batch": 4}), 2)
        threads = [sync._heartbeat._thread for sync in syncs]
        assert all(thread.is_alive() for thread in threads)

        def rank(r: int) -> list[float]:
            deadline = time.monotonic() + 3
            while r == 0 and time.monotonic() < deadline:  # rank 1 says nothing meanwhile
                train_steps(nets[0], syncs[0], batches(1, 4))
            time.sleep(3 * r)
            train_steps(nets[r], syncs[r], batches(1, 4, seed=r))
            return syncs[r].allreduce_sum([1.0])

        assert run_ranks(rank, 2) == [[2.0], [2.0]]
        assert syncs[1]._heartbeat.beats >= 2 * (3 * BEATS_PER_TIMEOUT - 2)  # 2 shards
    finally:
        for sync in syncs:
            sync.close()
    assert not any(thread.is_alive() for thread in threads)
    assert "silent" not in shards.log_text()


def _beating(sync) -> bool:
    """Whether a heartbeat thread of ``sync``'s run is alive (threads are named by run)."""
    name = f"distconv-heartbeat-{sync.rank}-{sync._run}"
    return any(t.name == name for t in threading.enumerate())


@pytest.mark.timeout(30)
def test_one_heartbeat_per_worker_from_setup_to_close_and_none_in_sync_mode(shards):
    endpoints = shards.start(1, workers=1, mode="async")
    sync = insecure_worker(endpoints)
    try:
        sync.setup(small_net().parameters(), {})
        first = sync._heartbeat._thread
        sync.setup(small_net().parameters(), {})  # a second setup: a new heartbeat
        assert not first.is_alive() and sync._heartbeat._thread.is_alive()
        assert sum(t.name.endswith(f"-{sync._run}") for t in threading.enumerate()) == 1
    finally:
        sync.close()
    assert not _beating(sync)
    plain = insecure_worker(shards.start(1, workers=1))  # sync mode declares nobody lost
    try:
        plain.setup(small_net().parameters(), {})
        assert plain._heartbeat is None and not _beating(plain)
    finally:
        plain.close()


@pytest.mark.timeout(30)
def test_a_second_setup_refused_at_its_hello_stops_the_first_heartbeat(shards):
    """The shards refuse the second setup's hello (another model): the first setup's heartbeat
    must not beat on for a worker whose caller may never close it."""
    endpoints = shards.start(1, workers=1, mode="async")
    sync = insecure_worker(endpoints)
    try:
        sync.setup(small_net().parameters(), {})
        assert _beating(sync)
        with pytest.raises(SyncError, match="runs another job"):
            sync.setup(small_net(hidden=5).parameters(), {})
        assert sync._heartbeat is None and not _beating(sync)
    finally:
        sync.close()


@pytest.mark.timeout(30)
def test_a_failed_setup_stops_the_heartbeat(shards):
    """Setup fails after the hello (optimizer state without Adam's moments): the heartbeat
    stops with it, or a caller that goes on without closing would keep the rank alive on
    every shard for ever."""
    endpoints = shards.start(2, workers=1, mode="async")
    sync = insecure_worker(endpoints, optimizer="adam")
    try:
        net = small_net()
        empty = {p.name: {} for p in net.parameters()}  # entries without Adam's moments
        with pytest.raises(ValueError, match="optimizer state to restore lacks"):
            sync.setup(net.parameters(), {}, state=empty)
        assert sync._heartbeat is None and not _beating(sync)
    finally:
        sync.close()


def _train_beside(victim, sync, net, rank: int, until) -> None:
    """Set up ``sync`` beside the ``victim`` process, kill the victim after its third step,
    then train ``sync`` until ``until()`` holds (for 20 s at most)."""
    assert victim.stdout.readline().strip() == "ready"  # its imports do not count as silence

    def train(_):
        sync.setup(net.parameters(), {"batch": 8})
        deadline = time.monotonic() + 20
        while not until() and time.monotonic() < deadline:
            train_steps(net, sync, batches(1, 8), rank, 2)

    def kill_after_three(_):
        for line in victim.stdout:
            if line.strip() == "step 3":
                victim.send_signal(signal.SIGKILL)
                return

    run_ranks(lambda r: train(r) if r == 0 else kill_after_three(r), 2, timeout=60)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("policy", ["fail", "continue"])
def test_a_killed_worker_process_is_declared_lost(shards, tmp_path, policy):
    """A worker killed mid-training is lost: with ``fail`` the job stops naming it, with
    ``continue`` the others go on without it. On this host the shard sees its process end
    (distconv.sync.ps.processes), where elsewhere it would fall silent for the timeout,
    heartbeat and all (that rule: the hand-fed tests above)."""
    endpoints = shards.start(1, **ASYNC, extra=_loss(policy, timeout=LONG))
    victim = worker_process(endpoints, 1, 2, 1000, tmp_path)
    net, sync = small_net(), insecure_worker(endpoints, 0, 2)
    gone = rf"rank 1 \(host .*\): its process \(pid {victim.pid}, on this host\) ended without"
    try:
        if policy == "fail":
            with pytest.raises(SyncError, match=gone):
                _train_beside(victim, sync, net, 0, lambda: False)
        else:
            _train_beside(victim, sync, net, 0, lambda: "going on without" in shards.log_text())
            assert re.search(gone, shards.log_text()), shards.log_text()[-3000:]
            assert sync.allreduce_sum([2.0]) == [2.0]  # the collective goes on without rank 1
    finally:
        sync.close()
        victim.kill()
        victim.communicate()


@pytest.mark.timeout(90)
def test_a_killed_chief_stops_the_job_even_with_continue(shards, tmp_path):
    endpoints = shards.start(2, **ASYNC, extra=_loss("continue", timeout=LONG))
    victim = worker_process(endpoints, 0, 2, 1000, tmp_path)
    net, sync = small_net(1), insecure_worker(endpoints, 1, 2)
    try:
        with pytest.raises(SyncError) as err:
            _train_beside(victim, sync, net, 1, lambda: False)
    finally:
        sync.close()
        victim.kill()
        victim.communicate()
    assert "rank 0 (host " in str(err.value) and CHIEF_LOST in str(err.value)
    assert f"its process (pid {victim.pid}, on this host) ended without a bye" in str(err.value)


@pytest.mark.timeout(30)
def test_a_shard_that_refuses_the_heartbeat_gets_no_more_beats_and_the_others_still_do(
    shards, caplog
):
    """A newer worker of rank 1 said hello on shard 0 only: shard 0 refuses the old worker's
    beats, which stop there, logged; shard 1 still hears from a process that lives (one
    refusal once silenced the rank on every shard)."""
    endpoints = shards.start(2, **ASYNC)
    ctx = zmq.Context()
    caplog.set_level(logging.WARNING, "distconv.pserver")
    try:
        newer, probe = raw_dealer(ctx, endpoints[0]), raw_dealer(ctx, endpoints[1])
        hello = {"op": "hello", "id": 1, "job": "local", "rank": 1, "host": "h", "run": 12}
        newer.send_multipart(pack({**hello, **hello_fields({})}))
        assert newer.poll(5000) and unpack_header(newer.recv(), request=False)["op"] == "ok"

        def connect(shard: int) -> zmq.Socket:
            return raw_dealer(ctx, endpoints[shard])

        header = {"op": "beat", "job": "local", "rank": 1, "run": 11}
        beat = Heartbeat(connect, header, list(enumerate(endpoints)), interval=0.05)
        deadline = time.monotonic() + 5
        while "no more beats to it" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        before = _stats(probe)["bytes_in"]
        time.sleep(0.5)
        assert _stats(probe)["bytes_in"] > before + 100  # beats go on to shard 1
        assert beat._thread.is_alive()
        beat.stop()
        assert not beat._thread.is_alive()
        newer.close()
        probe.close()
    finally:
        ctx.term()
    assert f"heartbeat refused by pserver {endpoints[0]}, no more beats to it" in caplog.text
    assert "this worker's beat is of the run before, refused" in caplog.text
    assert endpoints[1] not in caplog.text


def test_the_heartbeat_beats_the_shards_that_take_it_within_bounds():
    """Beats go to the shards whose hello reply says async mode and a timeout (a reply without
    one predates ``beat``), a quarter of the shortest timeout apart, never closer than 50 ms:
    each shard joins the heartbeat as its reply arrives, the first one starting it."""
    sync = insecure_worker([f"127.0.0.1:{port}" for port in (1, 2, 3, 4)])  # nobody there
    beat_socket, made = sync._beat_socket, []
    sync._beat_socket = lambda shard: made.append(shard) or beat_socket(shard)  # its thread's
    try:
        hellos = [{"mode": "async", "timeout": 8.0}, {"mode": "async"}, {"mode": "async",
                  "timeout": 4.0}, {"mode": "async", "timeout": float("nan")}]  # fmt: skip
        for shard, hello in enumerate(hellos):
            sync._beat_from_hello(shard, hello)
        assert sync._heartbeat.shards == {0, 2} and sync._heartbeat.interval == 1.0
        deadline = time.monotonic() + 5  # the thread's next round: at once for an added shard
        while sorted(made) != [0, 2] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(made) == [0, 2]  # beaten, not only listed: the thread has their sockets
        sync._stop_heartbeat()
        sync._beat_from_hello(0, {"mode": "async", "timeout": 0.001})
        assert sync._heartbeat.interval == INTERVAL_BOUNDS[0]
        sync._stop_heartbeat()
        sync._beat_from_hello(0, {"mode": "sync", "timeout": 4.0})
        assert sync._heartbeat is None
    finally:
        sync.close()


@pytest.mark.parametrize("timeout", [0.0, -1.0, 0.1, float("inf"), float("nan")])
def test_a_shard_timeout_must_be_finite_and_at_least_four_shortest_beats(timeout):
    with pytest.raises(ValueError, match=r"--timeout must be finite and >= 0\.2, got"):
        ShardConfig(bind="127.0.0.1:0", insecure=True, timeout=timeout).check()


def test_the_pserver_command_names_a_bad_flag_without_a_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0", "--insecure",
         "--shard", "0", "--num-shards", "1", "--workers", "1", "--timeout", "0.1"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": child_path()},
    )  # fmt: skip
    assert proc.returncode == 1
    assert (
        proc.stderr.strip()
        == "distconv pserver: error: --timeout must be finite and >= 0.2, got 0.1"
    )


@pytest.mark.timeout(30)
def test_a_beat_to_a_shard_not_there_is_dropped_not_queued():
    """Nobody listens at the endpoint: each beat is refused at once (IMMEDIATE) instead of
    piling up for a shard that comes back, and none is counted as sent."""
    with socket.socket() as probe:  # a port nobody listens at once this closes
        probe.bind(("127.0.0.1", 0))
        nobody = f"127.0.0.1:{probe.getsockname()[1]}"
    sync = insecure_worker([nobody])
    try:
        header = {"op": "beat", "job": "local", "rank": 0, "run": 1}

        def connect(shard: int) -> zmq.Socket:
            return sync._connect(shard, immediate=True)

        beat = Heartbeat(connect, header, [(0, nobody)], interval=0.05)
        time.sleep(0.5)
        beat.stop()
        assert beat.beats == 0
    finally:
        sync.close()


def test_a_second_setup_after_the_gather_began_is_no_late_start(hand):
    """Rank 1 set up again (a second hello of its run) after the gather began, then stays
    away: it joined the run before the gather, so with continue it is lost, not taken for a
    rank late to start."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    for rank in (0, 1):
        assert _hello(h, rank, rank)["op"] == "ok"
    _gather(h, 0, "barrier:2", None)
    assert _hello(h, 1, 1)["op"] == "ok"  # the same run: a second setup
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.lost == {1} and not h.shard.failed


def test_a_refused_hello_is_no_sign_of_life(hand):
    """Rank 1's first hello is refused (another job): it never joined, so it is never declared
    lost as silent (which would refuse its corrected restart for good); the start-up gather's
    timeout fails the job instead."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    assert _hello(h, 0, 5)["op"] == "ok"
    refused = h.ask({"op": "hello", "rank": 1, "host": "h", **hello_fields({"x": 1}), "run": 6})
    assert "run different jobs" in refused[0]["error"]
    assert 1 not in h.shard.last_seen
    _gather(h, 0, "all_equal:1", "{}")
    h.shard.waiting["gather:all_equal:1"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert (
        not h.shard.lost
        and "rank 1 (host h, no step since its hello) sent nothing" in h.shard.failed
    )


def test_a_rank_whose_restart_was_refused_after_the_gather_began_is_no_straggler(hand):
    """Rank 1's old worker lives on (it beats) while its restart, refused (another job), died
    without a bye: the rank's latest hello came after the gather began, so the job fails and
    restarts instead of leaving rank 1 out for good."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    for rank in (0, 1):
        assert _hello(h, rank, rank)["op"] == "ok"
    _gather(h, 0, "barrier:2", None)
    refused = h.ask({"op": "hello", "rank": 1, "host": "h", **hello_fields({"x": 1}), "run": 7})
    assert "run different jobs" in refused[0]["error"]
    assert h.ask({"op": "beat", "rank": 1, "run": 1})[0]["op"] == "ok"  # the old worker
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert (
        not h.shard.lost
        and "rank 1 (host h, no step since its hello) sent nothing" in h.shard.failed
    )


def test_distconv_train_starts_without_pyzmq():
    """The command line declares the pserver's flags and errors without importing ZeroMQ."""
    code = "import sys, distconv.cli; print(sorted(m for m in sys.modules if 'zmq' in m))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": child_path()})  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


def test_a_gather_timeout_says_which_missing_rank_closed(hand):
    """Rank 0 said bye before the ranks ever met (the stuck check cannot tell whose run the
    bye is of), and rank 1 waits in a gather: the timeout's message says rank 0 closed,
    where it said only "sent nothing"."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    for rank in (0, 1):
        assert _hello(h, rank, rank)["op"] == "ok"
    assert h.ask({"op": "bye", "rank": 0, "run": 0})[0]["op"] == "ok"
    _gather(h, 1, "barrier:1", None)
    h.shard.waiting["gather:barrier:1"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert h.shard.failed == (
        "rank 0 (host h, no step since its hello) sent nothing for barrier:1 "
        "(a meeting of every rank) within "
        "1 s (rank 0 closed)"
    )


def test_a_restart_refused_before_the_gather_still_makes_its_rank_late(hand):
    """Rank 1's restart was refused (another job) and died, then the gather began while its
    old worker lives on: a refusal since the rank's accepted hello makes it late, whenever it
    came, so the job fails rather than leaving rank 1 out for good."""
    h = hand(workers=2, mode="async", on_worker_loss="continue", timeout=1.0)
    for rank in (0, 1):
        assert _hello(h, rank, rank)["op"] == "ok"
    refused = h.ask({"op": "hello", "rank": 1, "host": "h", **hello_fields({"x": 1}), "run": 7})
    assert "run different jobs" in refused[0]["error"]
    _gather(h, 0, "barrier:2", None)
    assert h.ask({"op": "beat", "rank": 1, "run": 1})[0]["op"] == "ok"  # the old worker
    h.shard.waiting["gather:barrier:2"].since -= 10
    h.shard._check_timeouts(time.monotonic())
    assert (
        not h.shard.lost
        and "rank 1 (host h, no step since its hello) sent nothing" in h.shard.failed
    )
