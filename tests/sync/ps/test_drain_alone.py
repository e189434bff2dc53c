"""A shard stopped alone by SIGTERM (a node drain, a rolling restart of the shards) while its
workers train on (they ignore its ask to stop: of an older release): it fails the job naming
itself, so every worker stops at once with its words, not after 1.5 x --timeout of silence;
real shard and ``distconv train`` processes (workers of this release stop with a checkpoint:
``test_shard_asks_stop.py``)."""

from __future__ import annotations

import pickle
import signal
import subprocess
import time

import pytest
from ps_helpers import exits_within
from test_ps_drain import bare_shard, started_worker, trained_a_step

from distconv.sync.base import SyncError
from distconv.sync.peers import PEER_FAILED_STATUS, PeerFailed
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.drain import (
    ANSWER_SECONDS,
    DRAIN_FLOOR_SECONDS,
    DRAIN_STEPS,
    TOLD_LINGER_MS,
)
from distconv.sync.ps.reply_errors import reply_error
from distconv.sync.ps.server import Shard
from launcher.drained_shard import NAMED_SHARD_SECONDS, stopped_shard_in
from tests.source_copy import copy_ignoring_stop_asks

#: the workers' --timeout: a worker left without answers would wait 1.5 times it (90 s)
WORKER_TIMEOUT = 60
#: the shards' drain: its floor, the seconds the workers train on past the signal, is as long
DRAIN_SECONDS = 3
#: how soon after the shard's stop every worker must have exited (the shard's words reach them
#: with their next request; the rest is a worker's close)
EXIT_SECONDS = 15


def training_job(
    shards, tmp_path, monkeypatch, mode: str, world: int = 2
) -> list[subprocess.Popen]:
    """Two shards (``mode``, draining up to :data:`DRAIN_SECONDS`) and ``world`` real workers
    on them, returned once each has trained a step. The shards say they run on another host
    than the workers, as in a cluster: no worker sees a shard's process end
    (:mod:`distconv.sync.ps.processes`), only what the shard says or its silence. The workers
    are of a release before the shard's ask to stop
    (:func:`~tests.source_copy.copy_ignoring_stop_asks`)."""
    monkeypatch.setenv("HOSTNAME", "shard-host")  # the shards' hello replies name it
    endpoints = shards.start(2, world, mode=mode, extra=("--drain-seconds", str(DRAIN_SECONDS)))
    monkeypatch.setenv("HOSTNAME", "worker-host")
    source = copy_ignoring_stop_asks(tmp_path / "older")
    started = [
        started_worker(endpoints, r, world, tmp_path / f"w{r}", WORKER_TIMEOUT, source)
        for r in range(world)
    ]
    workers = [w for w, _ in started]
    try:
        for worker, port in started:
            trained_a_step(worker, port)
    except BaseException:
        stop_all(workers)
        raise
    return workers


def stop_all(workers: list[subprocess.Popen]) -> list[str]:
    """Kill whichever of ``workers`` still runs; each one's output."""
    for worker in workers:
        worker.kill()
    return [worker.communicate()[0] for worker in workers]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_workers_stop_at_once_naming_a_shard_stopped_alone(shards, tmp_path, monkeypatch, mode):
    workers = training_job(shards, tmp_path, monkeypatch, mode)
    try:
        shards.procs[0].send_signal(signal.SIGTERM)  # shard 1 and the workers are not told
        signalled = time.monotonic()
        stopped = exits_within(shards.procs[0], DRAIN_SECONDS + ANSWER_SECONDS + 20)
        assert stopped == 0, shards.log_text()[-3000:]
        statuses = [exits_within(w, EXIT_SECONDS) for w in workers]
        took = time.monotonic() - signalled
    finally:
        outputs = stop_all(workers)
    said = f"shard 0 stopped on its SIGTERM while rank(s) 0, 1 trained on {DRAIN_STEPS} steps"
    for rank, (status, output) in enumerate(zip(statuses, outputs)):
        # before, a worker waited 1.5 x --timeout (90 s) for answers, then exited 1; now it
        # stops at once as the victim of the shard's stop (stopped_shard, docs/protocol.md):
        # 75, "try again", the cause elsewhere, as for another rank's failure
        assert status is not None, f"rank {rank} did not stop within {EXIT_SECONDS} s"
        assert status == PEER_FAILED_STATUS, f"rank {rank} exited {status}: {output[-3000:]}"
        assert said in output, output[-3000:]
        assert stopped_shard_in(output.splitlines()) == 0, output[-3000:]  # as the launcher reads
    assert took < DRAIN_SECONDS + EXIT_SECONDS, f"the workers stopped {took:.0f} s after it"
    assert f"shard 0: job failed: {said}" in shards.log_text(), shards.log_text()[-3000:]
    # the other shard serves the workers' restart: their byes ended its job, none failed it
    assert "job failed" not in shards.logs[1].read_text(), shards.logs[1].read_text()[-3000:]


def test_a_shard_that_failed_on_its_stop_serves_until_each_rank_was_told():
    shard = bare_shard(accepted_at={0: 1, 1: 2}, last_step={0: 10, 1: 10})
    later = time.monotonic() + DRAIN_FLOOR_SECONDS
    try:
        assert not shard.drained(later)
        shard.last_step = {0: 10 + DRAIN_STEPS, 1: 10 + DRAIN_STEPS}
        assert not shard.drained(later), "it stopped without a word to the ranks still in"
        assert shard.failed == (
            f"shard 0 stopped on its SIGTERM while rank(s) 0, 1 trained on {DRAIN_STEPS} "
            f"steps and {DRAIN_FLOOR_SECONDS:g} s since the signal: they were not stopped "
            "with it; a restart of the job resumes from its newest checkpoint"
        )
        assert shard.failed_ranks == []  # no worker failed: the shard's own failure
        assert shard._failed_fields() == {"stopped_shard": 0}  # its workers: victims, 75
        shard.note_told({"op": "push", "rank": 0})
        shard.note_told({"op": "beat", "rank": 1})  # its heartbeat thread drops the reply
        assert not shard.drained(later + 1), "it stopped before rank 1 was told"
        shard.left = {1}  # said bye (its worker stopped on another shard's word)
        assert shard.drained(later + 1)
    finally:
        shard.close()


def test_a_shard_whose_ranks_say_nothing_after_its_failure_stops_soon():
    shard = bare_shard(accepted_at={0: 1}, last_step={0: 10})
    end = time.monotonic() + 60  # bare_shard's --drain-seconds: its end, ranks still in
    try:
        assert not shard.drained(end)
        assert shard.failed is not None and "were still in after its --drain-seconds (60 s)" in (
            shard.failed
        )
        assert not shard.drained(end + ANSWER_SECONDS - 0.5)
        assert shard.drained(end + ANSWER_SECONDS)
    finally:
        shard.close()


def test_a_shard_told_to_drain_no_time_fails_the_job_and_stops_at_once():
    """``--drain-seconds 0``: its held requests are answered with the failure, and it waits
    for no later one."""
    shard = Shard(ShardConfig(bind="127.0.0.1:0", insecure=True, drain_seconds=0))
    shard.accepted_at = {0: 1}
    shard.drain()
    try:
        assert shard.drained(time.monotonic())
        assert shard.failed is not None
        assert "rank(s) 0 were still in after its --drain-seconds (0 s)" in shard.failed
    finally:
        shard.close()


@pytest.mark.parametrize(
    ("field", "raised"),
    [(0, PeerFailed), (3, PeerFailed), (-1, SyncError), ("0", SyncError), (True, SyncError)],
)
def test_only_a_shards_index_in_stopped_shard_makes_the_worker_a_victim(field, raised):
    """A reply of another service, or a malformed one, is no shard's stop: the worker exits 1
    on its words, as before the field."""
    error = reply_error("rank 1, push: pserver x: shard 0 stopped", {"stopped_shard": field}, 1)
    assert type(error) is raised
    if raised is PeerFailed:
        assert (error.stopped_shard, error.ranks) == (field, ())
        assert pickle.loads(pickle.dumps(error)).stopped_shard == field  # a thread's hand-over


def test_the_drains_state_hides_no_method_of_the_shard():
    """The drain's attributes live on the shard beside its mixins' methods: one named
    ``_told`` hid the setup notes' ``_told``: a shard about to tell the ranks that one could
    not set up answered their job check's gather with ``shard error: TypeError: 'set' object
    is not callable`` instead (``tests/launcher/test_launch_setup_failure.py``)."""
    shard = Shard(ShardConfig(bind="127.0.0.1:0", insecure=True))
    try:
        hidden = [n for n in vars(shard) if callable(getattr(type(shard), n, None))]
        assert hidden == [], hidden
    finally:
        shard.close()


def test_the_launcher_waits_for_a_named_shard_as_long_as_it_answers_on():
    """The launcher's settle (which cannot import this module) waits for a shard that its
    victims name at least the shard's answer window and its closing linger: shorter, a
    silent worker kept the shard up past it, and the victim was blamed, exit 75."""
    assert NAMED_SHARD_SECONDS >= ANSWER_SECONDS + TOLD_LINGER_MS / 1000
