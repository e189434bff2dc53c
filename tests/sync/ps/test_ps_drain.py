"""A shard signalled together with its workers (a pod eviction signals every pod of the job at
once) serves on until they have checkpointed and said bye; real shard and worker processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from ps_helpers import REPO_ROOT, insecure_worker, small_net

from distconv.sync.ps.config import ShardConfig

SAMPLES = re.compile(rb"^distconv_samples_total\{[^}]*\} ([0-9.e+]+)", re.MULTILINE)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trained(port: int) -> bool:
    """Whether the worker behind health port ``port`` has finished a step."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            found = SAMPLES.search(reply.read())
    except OSError:
        return False
    return bool(found) and float(found.group(1)) > 0


def exits_within(proc: subprocess.Popen, seconds: float) -> int | None:
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


@pytest.mark.timeout(120)
def test_a_shard_signalled_with_its_worker_serves_until_the_worker_has_checkpointed(
    shards, tmp_path
):
    (endpoint,) = shards.start(1, 1, extra=("--drain-seconds", "60"))
    port, out = free_port(), tmp_path / "train"
    worker = subprocess.Popen(
        [sys.executable, "-m", "distconv", "train", "--data", "synthetic", "--epochs", "50",
         "--batch-size", "32", "--no-progress", "--pservers", endpoint, "--insecure",
         "--timeout", "5", "--out", str(out), "--health-port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1",
             "RANK": "0", "WORLD_SIZE": "1"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not trained(port):
            assert worker.poll() is None, worker.communicate()[0][-3000:]
            assert time.monotonic() < deadline, "the worker never trained a step"
            time.sleep(0.02)
        shards.procs[0].send_signal(signal.SIGTERM)  # both at once, as an eviction does
        worker.send_signal(signal.SIGTERM)
        output = worker.communicate(timeout=60)[0]
    finally:
        worker.kill()
    assert worker.returncode == 143, output[-3000:]
    stopped = re.search(r"stopped by SIGTERM after step (\d+)", output)
    assert stopped, output[-3000:]
    assert (out / "checkpoints" / f"step-{int(stopped.group(1)):08d}.json").exists()
    assert exits_within(shards.procs[0], 10) == 0, "the shard did not stop after the bye"
    assert "stopping once they say bye" in shards.log_text()


@pytest.mark.timeout(60)
def test_a_second_signal_stops_a_draining_shard_at_once(shards):
    (endpoint,) = shards.start(1, 1, extra=("--drain-seconds", "60"))
    sync = insecure_worker([endpoint], timeout=5)
    try:
        sync.setup(small_net().parameters())  # in the job, and never says bye here
        shard = shards.procs[0]
        shard.send_signal(signal.SIGTERM)
        assert exits_within(shard, 1.5) is None, "it stopped with a worker still in"
        shard.send_signal(signal.SIGTERM)
        assert exits_within(shard, 10) == 0
        assert "stopping once they say bye" in shards.log_text()
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_a_shard_no_worker_is_in_stops_at_its_first_signal(shards):
    shards.start(1, 1, extra=("--drain-seconds", "60"))
    shards.procs[0].send_signal(signal.SIGINT)
    assert exits_within(shards.procs[0], 10) == 0


@pytest.mark.parametrize("seconds", [-1.0, float("inf"), float("nan")])
def test_the_drain_is_finite_and_not_negative(seconds):
    with pytest.raises(ValueError, match="--drain-seconds must be finite and >= 0"):
        ShardConfig(bind="127.0.0.1:0", insecure=True, drain_seconds=seconds).check()
