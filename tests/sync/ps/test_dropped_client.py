"""A ``PServerSync`` dropped without ``close()`` (a notebook cell run again, a script that
forgets ``close()`` or raises before it) says the same orderly ``bye``, once it is collected or
its interpreter exits. Before, the shard took it for a worker still training: the rank's next
``hello`` ended the run as a killed or crashed worker's, a process that exited was logged as
killed or crashed, and a SIGTERM of the shard served it for the whole ``--drain-seconds``. Real
shards on 127.0.0.1 and real worker processes."""

from __future__ import annotations

import gc
import logging
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

import pytest
from ps_helpers import batches, insecure_worker, rank_0_beside, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.peers import PeerFailed
from tests.child_env import child_env, child_path

#: a child that imports ps_helpers, as the tests here do
WORKER_ENV = child_env(PYTHONPATH=child_path(Path(__file__).parent), OMP_NUM_THREADS="1")

#: long enough that a shard still serving a worker cannot pass for one that stopped at once
DRAIN = 20
#: a shard with no worker in stops within this (it answers, then writes its stats)
STOPS_AT_ONCE = 5.0
CRASHED = "ended without a bye"


def stop_seconds(shards) -> float:
    """SIGTERM to the one shard of ``shards``; the seconds it took to exit."""
    began = time.monotonic()
    shards.procs[0].send_signal(signal.SIGTERM)
    try:
        shards.procs[0].wait(timeout=DRAIN + 10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the shard did not stop: {shards.log_text()}")
    return time.monotonic() - began


def trained_worker(endpoint: str):
    """A worker (rank 0 of 1) set up on ``endpoint`` that trained two steps."""
    net, sync = small_net(), insecure_worker([endpoint])
    sync.setup(net.parameters())
    train_steps(net, sync, batches(2, 8))
    return sync


def dropped(sync) -> None:
    """Drop ``sync``, the caller's last reference, and collect: it must be gone, and so must
    its async heartbeat's thread."""
    beating = sync._heartbeat._thread if sync._heartbeat is not None else None
    ref = weakref.ref(sync)
    del sync
    gc.collect()
    assert ref() is None, gc.get_referrers(ref())
    assert beating is None or not beating.is_alive()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_dropped_worker_leaves_and_the_shard_stops_at_once(shards, mode):
    """The shard's SIGTERM finds no rank in: the dropped worker said bye. In async mode its
    heartbeat's thread, which held the worker, kept it alive and beating."""
    (endpoint,) = shards.start(1, 1, mode=mode, extra=("--drain-seconds", str(DRAIN)))
    dropped(trained_worker(endpoint))
    assert stop_seconds(shards) < STOPS_AT_ONCE, shards.log_text()
    log = shards.log_text()
    assert CRASHED not in log and "still in" not in log and "job failed" not in log, log


@pytest.mark.timeout(90)
def test_a_cell_run_again_ends_the_job_before_on_its_bye(shards):
    """Its first worker dropped, a new one of the same rank sets up: the shard says the job
    before ended on its workers' byes, not that the run ended on a killed or crashed worker."""
    (endpoint,) = shards.start(1, 1)
    dropped(trained_worker(endpoint))
    trained_worker(endpoint).close()
    log = shards.log_text()
    assert "the job before ended (its workers said bye)" in log, log
    assert CRASHED not in log, log


#: a worker script that trains two steps and exits without close(): on its own, or on an
#: exception (argv[2] "raise"); argv[1]: the shard
UNCLOSED = """
import sys
from ps_helpers import batches, insecure_worker, rank_0_beside, small_net, train_steps
net, sync = small_net(), insecure_worker([sys.argv[1]])
sync.setup(net.parameters())
train_steps(net, sync, batches(2, 8))
print("trained", flush=True)
if sys.argv[2] == "raise":
    raise RuntimeError("the script failed before close()")
"""


def run_unclosed(endpoint: str, how: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", UNCLOSED, endpoint, how],
        capture_output=True,
        text=True,
        timeout=60,
        env=WORKER_ENV,
    )


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", ["exit", "raise"])
def test_a_process_that_exits_without_close_says_bye(shards, how):
    """The shard, on the worker's host, follows its process: one that ends without a bye is
    logged as killed or crashed, and a sync job fails on it. The interpreter's exit says it."""
    (endpoint,) = shards.start(1, 1, extra=("--drain-seconds", str(DRAIN)))
    worker = run_unclosed(endpoint, how)
    assert "trained" in worker.stdout, worker.stderr[-3000:]
    assert worker.returncode == (1 if how == "raise" else 0), worker.stderr[-3000:]
    time.sleep(1.5)  # the shard's looks at the worker's process (every 0.5 s) have run
    assert stop_seconds(shards) < STOPS_AT_ONCE, shards.log_text()
    log = shards.log_text()
    assert CRASHED not in log and "still in" not in log and "job failed" not in log, log


@pytest.mark.timeout(60)
def test_exit_is_not_held_by_a_shard_that_is_gone(shards):
    """The bye to a shard killed meanwhile is only queued: the exit waits a fifth of a second
    for it at most, not the worker's timeout (20 s)."""
    (endpoint,) = shards.start(1, 1)
    code = UNCLOSED.replace('print("trained", flush=True)', 'print("trained", flush=True)\ninput()')
    worker = subprocess.Popen(
        [sys.executable, "-c", code, endpoint, "exit"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=WORKER_ENV,
    )
    try:
        assert worker.stdout.readline() == "trained\n", worker.stderr.read()[-3000:]
        shards.procs[0].kill()
        shards.procs[0].wait()
        began = time.monotonic()
        worker.stdin.write("\n")
        worker.stdin.close()
        assert worker.wait(timeout=30) == 0, worker.stderr.read()[-3000:]
        assert time.monotonic() - began < 3.0
    finally:
        worker.kill()
        worker.wait()
        worker.stdout.close()
        worker.stderr.close()


#: rank 1 of 2, which trains one step and then, by argv[2]: "uncaught", dies on an uncaught
#: error; "stale", exits cleanly after an error of an earlier "cell" (before its setup);
#: "collected", is dropped and garbage-collected after such an error, then exits. None closes.
#: A cell's error is what a notebook's or a REPL's shows: ``code``'s printing of its traceback
#: sets ``sys.last_exc`` (``sys.last_value``), as the interpreter's does for an uncaught one.
RANK_1 = """
import code, gc, sys
from ps_helpers import batches, insecure_worker, rank_0_beside, small_net, train_steps
def cell_error(words):
    code.InteractiveInterpreter().runsource(f"raise ValueError({words!r})")
how = sys.argv[2]
if how == "stale":
    cell_error("an earlier cell")
net, sync = small_net(), insecure_worker([sys.argv[1]], 1, 2)
sync.setup(net.parameters())
train_steps(net, sync, batches(1, 8), 1, 2)
if how == "uncaught":
    raise RuntimeError("rank 1 failed between steps")
if how == "collected":
    cell_error("a later cell")
    del sync
    gc.collect()
"""


def rank_0_told(endpoint: str, how: str) -> SyncError:
    """Rank 0 of 2 trains while rank 1 (:data:`RANK_1`, ``how``) leaves after one step; the
    error rank 0's second step ends on."""
    told, status, err = rank_0_beside(
        endpoint, [sys.executable, "-c", RANK_1, endpoint, how], WORKER_ENV
    )
    assert status == (1 if how == "uncaught" else 0), err[-3000:]
    return told


@pytest.mark.timeout(90)
def test_a_rank_that_dies_on_an_uncaught_error_is_named_its_cause(shards):
    """The interpreter's exit says bye with the uncaught error, worded as what it is: the rank
    waiting in the step is told that rank 1 failed (a PeerFailed naming it, which ``run_main``
    exits 75 on, so the launcher reports rank 1), not that it closed after fewer steps, which
    blamed no one, and the launcher reported whichever rank exited first."""
    (endpoint,) = shards.start(1, 2)
    told = rank_0_told(endpoint, "uncaught")
    cause = 'closed on "exited after an uncaught error: RuntimeError: rank 1 failed between steps"'
    assert isinstance(told, PeerFailed) and told.ranks == (1,), told
    assert cause in str(told), told


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", ["stale", "collected"])
def test_an_error_that_did_not_end_the_worker_is_not_its_bye(shards, how):
    """An uncaught error of an earlier cell, before the worker's setup, or a collection while
    the program runs (whatever error the interpreter printed last), says a plain bye: rank 1
    closed, no one blamed."""
    (endpoint,) = shards.start(1, 2)
    told = rank_0_told(endpoint, how)
    assert not isinstance(told, PeerFailed), told
    assert "rank 1 (host " in str(told) and "closed;" in str(told), told


class CollectOnRefusal(logging.Handler):
    """Collects garbage on the thread that logs a heartbeat's refusal (the heartbeat's own),
    as any allocation there may; records that thread."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "heartbeat refused" in record.getMessage():
            self.threads.append(threading.current_thread())
            gc.collect()


@pytest.mark.timeout(90)
def test_a_worker_collected_on_its_heartbeats_thread_ends(shards):
    """An async worker freed only by a collection (a reference cycle), and collected on its
    heartbeat's thread: its end cannot wait there for that thread to stop (nor terminate the
    context while that thread's sockets are open), so another thread ends it; the heartbeat
    stops and the worker is gone. Here the shard refuses the dropped worker's beats once a
    newer worker of its rank says hello, and the refusal's log line collects."""
    (endpoint,) = shards.start(1, 1, mode="async", extra=("--timeout", "1"))
    logger, handler = logging.getLogger("distconv.pserver"), CollectOnRefusal()
    dropped_one = trained_worker(endpoint)
    beating, ref = dropped_one._heartbeat._thread, weakref.ref(dropped_one)
    cycle: list = [dropped_one]
    cycle.append(cycle)
    del dropped_one, cycle
    gc.disable()  # no collection but the handler's
    logger.addHandler(handler)
    try:
        newer = trained_worker(endpoint)
        beating.join(timeout=10)
        newer.close()
    finally:
        logger.removeHandler(handler)
        gc.enable()
    assert handler.threads[:1] == [beating], handler.threads
    assert not beating.is_alive(), "the heartbeat still beats: its end waited on its own thread"
    assert ref() is None
