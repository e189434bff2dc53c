"""A shard signalled together with its workers (a pod eviction signals every pod of the job at
once) serves on until they have checkpointed and said bye; real shard and worker processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ps_helpers import exits_within, insecure_worker, small_net

from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.drain import DRAIN_FLOOR_SECONDS, DRAIN_STEPS
from distconv.sync.ps.server import Shard
from tests.child_env import child_path
from tests.probes import WORKER_PROBES, bound_port, trained_samples
from tests.source_copy import copy_ignoring_stop_asks


def started_worker(
    endpoints: list[str],
    rank: int,
    world: int,
    out: Path,
    timeout: int = 5,
    source: Path | None = None,
) -> tuple[subprocess.Popen, int]:
    """A real ``distconv train`` worker (rank ``rank`` of ``world``, ``--timeout timeout``) on
    the shards ``endpoints``, run directory ``out``, its output piped; and the health port it
    bound (the kernel's choice, from its line; the rest of its output is left in the pipe).
    ``source``: run from there (another build:
    :func:`~tests.source_copy.copy_ignoring_stop_asks`)."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--epochs", "5000",
         "--batch-size", "32", "--no-progress", "--pservers", ",".join(endpoints),
         "--insecure", "--timeout", str(timeout), "--out", str(out), "--health-port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": child_path(source) if source else child_path(),
             "OMP_NUM_THREADS": "1", "RANK": str(rank), "WORLD_SIZE": str(world)},
        cwd=source,  # -m puts the working directory first on the path
    )  # fmt: skip
    try:
        return worker, bound_port(worker.stdout, WORKER_PROBES, worker)
    except BaseException:
        worker.kill()
        worker.communicate()
        raise


def trained_a_step(worker: subprocess.Popen, port: int) -> None:
    """Return once ``worker`` (health port ``port``) has trained a step (its SIGTERM handler
    is in place); kill it and fail the test if it never does."""
    deadline = time.monotonic() + 60
    while trained_samples(port) <= 0:
        if worker.poll() is not None or time.monotonic() > deadline:
            worker.kill()
            pytest.fail(f"the worker never trained a step: {worker.communicate()[0][-3000:]}")
        time.sleep(0.02)


def training_worker(
    shards, tmp_path, drain_seconds: int = 60, source: Path | None = None
) -> subprocess.Popen:
    """A shard (draining up to ``drain_seconds``) and a real ``distconv train`` worker (rank 0
    of 1, run from ``source`` where given) on it, returned once the worker has trained a step
    (its SIGTERM handler is in place)."""
    (endpoint,) = shards.start(1, 1, extra=("--drain-seconds", str(drain_seconds)))
    worker, port = started_worker([endpoint], 0, 1, tmp_path / "train", source=source)
    trained_a_step(worker, port)
    return worker


def shard_then_worker_stopped(shards, worker: subprocess.Popen, delay: float) -> int:
    """SIGTERM to the shard, ``delay`` s later to the worker; the step the worker checkpointed
    at (it must have exited 143 naming it: by its own signal, or by the shard's ask, which may
    come first), once the shard has stopped too."""
    try:
        shards.procs[0].send_signal(signal.SIGTERM)
        time.sleep(delay)
        worker.send_signal(signal.SIGTERM)
        output = worker.communicate(timeout=60)[0]
    finally:
        worker.kill()
    assert worker.returncode == 143, output[-3000:]
    stopped = re.search(
        r"stopped by SIGTERM after step (\d+)|stopped after step (\d+): pserver shard 0 got", output
    )
    assert stopped, output[-3000:]
    assert exits_within(shards.procs[0], 10) == 0, "the shard did not stop after the bye"
    return int(stopped.group(1) or stopped.group(2))


@pytest.mark.timeout(120)
def test_a_shard_signalled_with_its_worker_serves_until_the_worker_has_checkpointed(
    shards, tmp_path
):
    step = shard_then_worker_stopped(shards, training_worker(shards, tmp_path), delay=0)
    assert (tmp_path / "train" / "checkpoints" / f"step-{step:08d}.json").exists()


@pytest.mark.timeout(120)
def test_a_shard_signalled_alone_stops_once_its_workers_train_on(shards, tmp_path):
    """A node drain or a rolling restart stops the shard only: workers that ignore its ask to
    stop (of an older release) train on, so it does not hold its replacement back for the
    whole drain (workers of this release stop: test_shard_asks_stop.py)."""
    # a 5 s drain makes the floor 5 s (the shorter of the two): the shard stops by the steps
    # rule (its message), not at the drain's end (another message), in half the time
    source = copy_ignoring_stop_asks(tmp_path / "older")
    worker = training_worker(shards, tmp_path, drain_seconds=5, source=source)
    try:
        shards.procs[0].send_signal(signal.SIGTERM)
        assert exits_within(shards.procs[0], DRAIN_FLOOR_SECONDS + 20) == 0, "it sat out the drain"
    finally:
        worker.kill()
        worker.communicate()
    said = f"trained on {DRAIN_STEPS} steps and 5 s since the signal"
    assert said in shards.log_text()


@pytest.mark.timeout(120)
def test_a_worker_signalled_a_second_after_its_shard_still_checkpoints(shards, tmp_path):
    """The kubelets signal a job's pods one by one: the worker's SIGTERM may come well over
    16 steps after the shard's. The worker ignores the shard's ask to stop (of an older
    release): its own signal is its stop. One of this release stops on the ask within a step,
    so the signal a second later could land as it exits, after its stop line (where the
    default handler is back: -15, not 143), which under load it did."""
    source = copy_ignoring_stop_asks(tmp_path / "older")
    worker = training_worker(shards, tmp_path, source=source)
    step = shard_then_worker_stopped(shards, worker, delay=1.0)
    assert (tmp_path / "train" / "checkpoints" / f"step-{step:08d}.json").exists()


@pytest.mark.timeout(120)
def test_a_sigterm_after_the_stop_line_still_ends_the_worker_with_the_stops_143(shards, tmp_path):
    """The shard's ask stops a worker of this release within a step; its pod's own SIGTERM,
    coming as it winds down after its stop line, killed it by the signal (-15), the default
    handler back once the fit returned."""
    worker = training_worker(shards, tmp_path)
    said = []
    try:
        shards.procs[0].send_signal(signal.SIGTERM)
        for line in worker.stdout:
            said.append(line)
            if "stopped after step" in line:
                worker.send_signal(signal.SIGTERM)
                break
        said.append(worker.communicate(timeout=60)[0])
    finally:
        worker.kill()
    assert worker.returncode == 143, "".join(said)[-3000:]


def test_the_drain_outlasts_a_signalled_workers_steps_to_its_stop():
    from distconv.trainer import STOP_CHECK_EVERY

    assert DRAIN_STEPS >= 2 * STOP_CHECK_EVERY  # a worker stops at the next stop check


def bare_shard(**state) -> Shard:
    """A shard that was told to drain, with ``state`` (its rank bookkeeping) set by hand."""
    shard = Shard(ShardConfig(bind="127.0.0.1:0", insecure=True, drain_seconds=60))
    for name, value in state.items():
        setattr(shard, name, value)
    shard.drain()
    return shard


def test_a_draining_shard_stops_once_the_job_failed_or_its_ranks_were_lost():
    now = time.monotonic()
    cases = {
        "in": (dict(accepted_at={0: 1, 1: 2}), False),
        "failed": (dict(accepted_at={0: 1}, failed="rank 1 sent nothing"), True),
        "lost": (dict(accepted_at={0: 1, 1: 2}, left={0}, lost={1}), True),
        "one left, one in": (dict(accepted_at={0: 1, 1: 2}, left={0}), False),
    }
    for name, (state, stops) in cases.items():
        shard = bare_shard(**state)
        try:
            assert shard.drained(now) is stops, name
        finally:
            shard.close()


def test_a_draining_shard_waits_while_one_in_rank_has_not_trained_on():
    shard = bare_shard(accepted_at={0: 1, 1: 2}, last_step={0: 10, 1: 10})
    later = time.monotonic() + DRAIN_FLOOR_SECONDS  # the ranks' own signals may come late
    try:
        assert not shard.drained(later)
        shard.last_step = {0: 10 + DRAIN_STEPS, 1: 12}  # rank 1 stopping (async: apart)
        assert not shard.drained(later)
        shard.last_step = {0: 10 + DRAIN_STEPS, 1: 10 + DRAIN_STEPS}
        assert not shard.drained(later - DRAIN_FLOOR_SECONDS)  # too soon
        assert shard.failed is None
        shard.drained(later)  # trained on: it fails the job (test_drain_alone.py), then stops
        assert shard.failed is not None
    finally:
        shard.close()


@pytest.mark.timeout(60)
def test_sigterms_within_a_second_are_one_request_and_a_later_one_stops_the_drain(shards):
    """A dead launcher's parent-death SIGTERM comes once per thread of it, milliseconds apart:
    those must not end the drain; a SIGTERM a second later means "now"."""
    (endpoint,) = shards.start(1, 1, extra=("--drain-seconds", "60"))
    sync = insecure_worker([endpoint], timeout=5)
    try:
        sync.setup(small_net().parameters())  # in the job, and never says bye here
        shard = shards.procs[0]
        for _ in range(3):
            shard.send_signal(signal.SIGTERM)
            time.sleep(0.003)
        assert exits_within(shard, 1.5) is None, "a repeat of the same SIGTERM stopped it"
        shard.send_signal(signal.SIGTERM)
        assert exits_within(shard, 10) == 0
        assert "stopping once they say bye" in shards.log_text()
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_sigint_stops_a_shard_at_once_with_a_worker_in(shards):
    """Ctrl-C, and the launcher's own stop once its workers are gone: no drain."""
    (endpoint,) = shards.start(1, 1, extra=("--drain-seconds", "60"))
    sync = insecure_worker([endpoint], timeout=5)
    try:
        sync.setup(small_net().parameters())
        shards.procs[0].send_signal(signal.SIGINT)
        assert exits_within(shards.procs[0], 10) == 0
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_the_launchers_stop_does_not_read_as_a_wait_in_the_log(shards):
    """SIGTERM, then at once SIGINT (the launcher's stop, its workers gone: here one never
    said bye): the shard stops, and does not log that it waits for them."""
    (endpoint,) = shards.start(1, 1, extra=("--drain-seconds", "60"))
    sync = insecure_worker([endpoint], timeout=5)
    try:
        sync.setup(small_net().parameters())
        shards.procs[0].send_signal(signal.SIGTERM)
        shards.procs[0].send_signal(signal.SIGINT)
        assert exits_within(shards.procs[0], 10) == 0
        assert "stopping once they say bye" not in shards.log_text()
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_a_shard_no_worker_is_in_stops_at_its_first_signal(shards):
    shards.start(1, 1, extra=("--drain-seconds", "60"))
    shards.procs[0].send_signal(signal.SIGTERM)
    assert exits_within(shards.procs[0], 10) == 0


@pytest.mark.parametrize("seconds", [-1.0, float("inf"), float("nan")])
def test_the_drain_is_finite_and_not_negative(seconds):
    with pytest.raises(ValueError, match="--drain-seconds must be finite and >= 0"):
        ShardConfig(bind="127.0.0.1:0", insecure=True, drain_seconds=seconds).check()
