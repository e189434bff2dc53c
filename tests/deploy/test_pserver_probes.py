"""A real ``distconv pserver`` serves its probes: not ready until seeded, healthy while serving."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync
from launcher.commands import free_ports

REPO_ROOT = Path(__file__).resolve().parents[2]


def status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as err:
        return err.code


def wait_listening(port: int, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while True:
        try:
            status(port, "/healthz")
            return
        except OSError:
            assert time.monotonic() < deadline, "the shard never served its probes"
            time.sleep(0.05)


@pytest.mark.timeout(60)
def test_shard_turns_ready_once_seeded_and_stays_healthy():
    (health,) = free_ports(1)
    shard = subprocess.Popen(
        [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0", "--shard", "0",
         "--num-shards", "1", "--workers", "1", "--insecure", "--health-port", str(health)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    try:
        endpoint = shard.stdout.readline().split()[-1]
        wait_listening(health)
        assert status(health, "/readyz") == 503 and status(health, "/healthz") == 200
        set_seed(0)
        net = lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)
        sync = PServerSync(
            create_optimizer("sgd", lr=0.1), rank=0, world_size=1, pservers=[endpoint],
            insecure=True, timeout=10,
        )  # fmt: skip
        try:
            sync.setup(net.parameters())
            deadline = time.monotonic() + 10
            while status(health, "/readyz") != 200:
                assert time.monotonic() < deadline, "seeded, but /readyz stayed 503"
                time.sleep(0.05)
            assert status(health, "/healthz") == 200
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{health}/metrics").read()
            assert b'distconv_ready{rank="0",role="server"} 1.0' in metrics
        finally:
            sync.close()
    finally:
        shard.terminate()
        assert shard.wait(timeout=20) == 0
        shard.stdout.close()


def test_probes_bind_loopback_unless_asked():
    from distconv.cli import build_parser

    args = build_parser().parse_args(
        ["pserver", "--bind", "0.0.0.0:1", "--shard", "0", "--num-shards", "1", "--workers", "1"]
    )
    assert args.health_host == "127.0.0.1" and args.health_port is None
    train = build_parser().parse_args(["train"])
    assert train.health_host == "127.0.0.1"
